// lib/core/model_kind.h: the one statement of what each model kind is made of, and the places
// that ask it (the model, the config's checks and resolution).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/core/model_kind.h"
#include "lib/run/config.h"

using namespace rmt;

TEST_CASE("model kinds: names, order and parsing") {
  CHECK(model_kind_list() == "baseline, mt, xl, rmt, xl_rmt, armt");  // the paper's order (Figure 4), then ARMT
  for (const ModelKindTraits& t : kModelKinds) {
    CAPTURE(t.name);
    REQUIRE(find_model_kind(t.name).has_value());
    CHECK(*find_model_kind(t.name) == t.kind);
    CHECK(&traits_of(t.kind) == &t);
    CHECK(&traits_of(std::string(t.name)) == &t);
  }
  std::string labels;
  for (const ModelKindTraits& t : kModelKinds) labels += std::string(t.label) + "; ";
  CHECK(labels == "baseline; MT; Tr-XL; RMT; Tr-XL + RMT; ARMT; ");  // the papers' names
  CHECK_FALSE(find_model_kind("gpt").has_value());
  CHECK_FALSE(find_model_kind("RMT").has_value());
  CHECK_FALSE(find_model_kind("").has_value());
  try {
    parse_model_kind("transformer");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "unknown model kind 'transformer' (kinds: baseline, mt, xl, rmt, xl_rmt, armt)");
  }
}

TEST_CASE("model kinds: what each is made of (docs/paper.md §2)") {
  auto is = [](ModelKind k, bool cache, bool memory, bool write, bool read, bool assoc) {
    const ModelKindTraits& t = traits_of(k);
    CAPTURE(t.name);
    CHECK(t.has_cache == cache);
    CHECK(t.has_memory == memory);
    CHECK(t.has_write_block == write);
    CHECK(t.has_read_block == read);
    CHECK(t.has_assoc == assoc);
    CHECK(t.reads_memory_from_cache() == (cache && memory));
    CHECK(t.carries_memory_tokens() == (memory && read));
  };
  is(ModelKind::baseline, false, false, false, false, false);
  is(ModelKind::mt, false, true, false, true, false);
  is(ModelKind::xl, true, false, false, false, false);
  is(ModelKind::rmt, false, true, true, true, false);
  is(ModelKind::xl_rmt, true, true, true, true, false);
  is(ModelKind::armt, false, true, true, false, true);  // docs/armt.md
}

TEST_CASE("the model, the config checks and resolve_kind follow the traits") {
  for (const ModelKindTraits& t : kModelKinds) {
    CAPTURE(t.name);
    ModelConfig c;
    c.kind = t.name;
    c.n_token = 5, c.n_layer = 1, c.n_head = 1, c.d_head = 2, c.d_model = 4, c.d_inner = 4;
    c.mem_len = 3;
    c.num_mem_tokens = 2;
    const Model model(c);
    CHECK(model.kind == t.kind);
    CHECK(model.mem_len == (t.has_cache ? 3 : 0));
    CHECK(model.num_mem == (t.has_memory ? 2 : 0));
    CHECK(model.write_block == t.has_write_block);
    CHECK(bool(model.W.mem) == t.has_memory);
    CHECK(model_param_count(c) == double(model.num_params()));

    ModelConfig resolved = c;
    resolve_kind(resolved);
    CHECK(resolved.mem_len == (t.has_cache ? 3 : 0));
    CHECK(resolved.num_mem_tokens == (t.has_memory ? 2 : 0));

    // What a kind has must be given a size; what it lacks may be 0.
    Config config;
    config.model = c;
    config.model.mem_len = 0;
    config.model.num_mem_tokens = 0;
    if (t.has_cache || t.has_memory) {
      CHECK_THROWS_AS(validate(config), Error);
    } else {
      CHECK_NOTHROW(validate(config));
    }
    config.model.mem_len = t.has_cache ? 1 : 0;
    config.model.num_mem_tokens = t.has_memory ? 1 : 0;
    CHECK_NOTHROW(validate(config));
    // model.d_mem belongs to armt: the other kinds' resolved configs reset it (as a sweep over
    // several kinds sets it for all)
    resolved.d_mem = 8;
    resolve_kind(resolved);
    CHECK(resolved.d_mem == (t.has_assoc ? 8 : ModelConfig().d_mem));
  }
}

TEST_CASE("armt: its parameters, its config's checks, and no GPU yet") {
  ModelConfig c;
  c.kind = "armt";
  c.n_token = 5, c.n_layer = 2, c.n_head = 1, c.d_head = 2, c.d_model = 4, c.d_inner = 4;
  c.num_mem_tokens = 2, c.d_mem = 3;
  Model model(c);
  CHECK(model.d_key == 18);  // DPFP nu = 3: 2 * 3 * d_mem
  CHECK(model.assoc_floats() == 18 * 4 + 18);
  REQUIRE(model.find("layers.1.W_mq.weight"));
  CHECK(model.find("layers.1.W_mq.weight")->shape == std::vector<int64_t>{3, 4});
  CHECK(model.find("layers.0.W_mv.weight")->shape == std::vector<int64_t>{4, 4});
  CHECK(model.find("layers.0.W_mb.bias")->shape == std::vector<int64_t>{1});
  CHECK(model_param_count(c) == double(model.num_params()));
  model.init_weights(1);
  const std::vector<float> params = model.params.download();
  const ParamInfo& mv = *model.find("layers.0.W_mv.weight");
  CHECK(std::all_of(params.begin() + mv.offset, params.begin() + mv.offset + mv.numel,
                    [](float x) { return x == 0.f; }));  // the authors' zeros_ init
  const ParamInfo& mq = *model.find("layers.0.W_mq.weight");
  CHECK(std::any_of(params.begin() + mq.offset, params.begin() + mq.offset + mq.numel,
                    [](float x) { return x != 0.f; }));
  Config config;
  config.model = c;
  CHECK_NOTHROW(validate(config));
  config.device = "cuda";
  try {
    validate(config);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("armt has not yet run on a GPU") != std::string::npos);
  }
}
