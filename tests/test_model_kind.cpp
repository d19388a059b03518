// lib/core/model_kind.h: the one statement of what each model kind is made of, and the places
// that ask it (the model, the config's checks and resolution).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/core/delta_mixer.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/core/model_kind.h"
#include "lib/run/checkpoint.h"
#include "lib/run/config.h"

using namespace rmt;

TEST_CASE("model kinds: names, order and parsing") {
  // the paper's order (Figure 4), then ARMT, then the delta-rule family
  CHECK(model_kind_list() == "baseline, mt, xl, rmt, xl_rmt, armt, deltanet, gated_deltanet");
  for (const ModelKindTraits& t : kModelKinds) {
    CAPTURE(t.name);
    REQUIRE(find_model_kind(t.name).has_value());
    CHECK(*find_model_kind(t.name) == t.kind);
    CHECK(&traits_of(t.kind) == &t);
    CHECK(&traits_of(std::string(t.name)) == &t);
  }
  std::string labels;
  for (const ModelKindTraits& t : kModelKinds) labels += std::string(t.label) + "; ";
  CHECK(labels == "baseline; MT; Tr-XL; RMT; Tr-XL + RMT; ARMT; DeltaNet; Gated DeltaNet; ");  // the papers' names
  CHECK_FALSE(find_model_kind("gpt").has_value());
  CHECK_FALSE(find_model_kind("RMT").has_value());
  CHECK_FALSE(find_model_kind("").has_value());
  try {
    parse_model_kind("transformer");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "unknown model kind 'transformer' (kinds: baseline, mt, xl, rmt, xl_rmt, armt, "
                                   "deltanet, gated_deltanet)");
  }
}

TEST_CASE("model kinds: what each is made of (docs/paper.md §2, docs/deltanet.md)") {
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
  is(ModelKind::deltanet, false, false, false, false, false);  // the mixer carries the state
  is(ModelKind::gated_deltanet, false, false, false, false, false);
  for (const ModelKindTraits& t : kModelKinds) {
    CAPTURE(t.name);
    const bool delta = t.kind == ModelKind::deltanet || t.kind == ModelKind::gated_deltanet;
    CHECK(t.has_mixer_state() == delta);
    CHECK((t.mixer == Mixer::attention) == !delta);
  }
  CHECK(traits_of(ModelKind::deltanet).mixer == Mixer::delta_rule);
  CHECK(traits_of(ModelKind::gated_deltanet).mixer == Mixer::gated_delta_rule);
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

TEST_CASE("deltanet and gated_deltanet: fla's parameters and initialisation, their keys, no GPU yet") {
  for (const char* kind : {"deltanet", "gated_deltanet"}) {
    CAPTURE(kind);
    const bool gated = std::string(kind) == "gated_deltanet";
    ModelConfig c;
    c.kind = kind;
    c.n_token = 5, c.n_layer = 2, c.n_head = 2, c.d_head = 3, c.d_model = 5, c.d_inner = 4;
    Model model(c);  // an odd d_model: no position table to need an even one
    const int dv = gated ? 6 : 3;  // expand_v 0: fla's layers' defaults, 2 for Gated DeltaNet, else 1
    CHECK(model.Dv == dv);
    CHECK(model.conv == 4);
    auto shape = [&](const std::string& name) {
      const ParamInfo* p = model.find(name);
      REQUIRE_MESSAGE(p, name);
      return p->shape;
    };
    using S = std::vector<int64_t>;
    CHECK(shape("layers.1.attn.q_proj.weight") == S{6, 5});
    CHECK(shape("layers.1.attn.v_proj.weight") == S{2 * dv, 5});
    CHECK(shape("layers.0.attn.b_proj.weight") == S{2, 5});
    CHECK(shape("layers.0.attn.v_conv1d.weight") == S{2 * dv, 1, 4});
    CHECK(shape("layers.0.attn.o_norm.weight") == S{dv});
    CHECK(shape("layers.0.attn.o_proj.weight") == S{5, 2 * dv});
    CHECK(shape("layers.0.attn_layer_norm.bias") == S{5});
    CHECK(bool(model.find("layers.0.attn.A_log")) == gated);
    CHECK(bool(model.find("layers.0.attn.g_proj.weight")) == gated);
    CHECK_FALSE(model.find("r_w_bias"));
    CHECK_FALSE(model.find("layers.0.dec_attn.qkv_net.weight"));
    CHECK(model_param_count(c) == double(model.num_params()));
    // S [H, Dk, Dv] and the convolution's 3 carried rows of q, k (H Dk each) and v (H Dv)
    CHECK(delta_state_floats_per_sample(model) == 2 * 3 * dv + 3 * (6 + 6 + 2 * dv));
    model.init_weights(1);
    const std::vector<float> params = model.params.download();
    auto values = [&](const std::string& name) {
      const ParamInfo& p = *model.find(name);
      return std::vector<float>(params.begin() + p.offset, params.begin() + p.offset + p.numel);
    };
    for (float x : values("layers.0.attn.o_norm.weight")) CHECK(x == 1.f);
    for (float x : values("layers.0.attn_layer_norm.weight")) CHECK(std::abs(x - 1.f) < 0.2f);
    if (gated) {
      for (float x : values("layers.1.attn.A_log")) CHECK(x <= std::log(16.f) + 1e-6f);
      for (float x : values("layers.1.attn.dt_bias")) {  // softplus(dt_bias) in [1e-4, 0.1]
        const double dt = std::log1p(std::exp(double(x)));
        CHECK(dt >= 1e-4 * 0.999);
        CHECK(dt <= 0.1 * 1.001);
      }
    }
    // The keys: written for these kinds only, expand_v resolved, in the checkpoint's metadata.
    Config config;
    config.model = c;
    resolve_kind(config.model);
    CHECK(config.model.expand_v == (gated ? 2 : 1));
    const std::string yaml = to_yaml(config);
    CHECK(yaml.find(fmt::format("expand_v: {}", gated ? 2 : 1)) != std::string::npos);
    CHECK(yaml.find("short_conv: 4") != std::string::npos);
    const std::map<std::string, std::string> md = model_metadata(config.model);
    CHECK(md.at("expand_v") == (gated ? "2" : "1"));
    CHECK(model_config_from_metadata(md, "test").short_conv == 4);
    CHECK_NOTHROW(validate(config));
    config.device = "cuda";
    CHECK_THROWS_WITH_AS(validate(config), doctest::Contains("has not yet run on a GPU"), Error);
  }
  Config rmt;
  rmt.model.kind = "rmt";
  rmt.model.expand_v = 3;
  resolve_kind(rmt.model);
  CHECK(rmt.model.expand_v == 0);  // another kind's: reset, not written
  CHECK(to_yaml(rmt).find("expand_v") == std::string::npos);
  CHECK(model_metadata(rmt.model).count("expand_v") == 0);
}
