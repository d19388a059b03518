#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/run/config.h"
#include "lib/run/config_family.h"
#include "tests/cli.h"

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Every field of two configs, compared one by one (doubles exactly).
void check_equal(const rmt::Config& a, const rmt::Config& b) {
  CHECK(a.data == b.data);
  CHECK(a.segments == b.segments);
  CHECK(a.segment_length == b.segment_length);
  CHECK(a.bptt == b.bptt);
  CHECK(a.bptt_recompute == b.bptt_recompute);
  CHECK(a.model.kind == b.model.kind);
  CHECK(a.model.n_layer == b.model.n_layer);
  CHECK(a.model.n_head == b.model.n_head);
  CHECK(a.model.d_head == b.model.d_head);
  CHECK(a.model.d_model == b.model.d_model);
  CHECK(a.model.d_inner == b.model.d_inner);
  CHECK(a.model.dropout == b.model.dropout);
  CHECK(a.model.dropatt == b.model.dropatt);
  CHECK(a.model.mem_len == b.model.mem_len);
  CHECK(a.model.num_mem_tokens == b.model.num_mem_tokens);
  CHECK(a.model.read_mem_from_cache == b.model.read_mem_from_cache);
  CHECK(a.model.mem_init == b.model.mem_init);
  CHECK(a.model.n_token == b.model.n_token);
  CHECK(a.train.batch_size == b.train.batch_size);
  CHECK(a.train.lr == b.train.lr);
  CHECK(a.train.schedule == b.train.schedule);
  CHECK(a.train.warmup_steps == b.train.warmup_steps);
  CHECK(a.train.clip == b.train.clip);
  CHECK(a.train.max_steps == b.train.max_steps);
  CHECK(a.train.eval_every == b.train.eval_every);
  CHECK(a.train.patience == b.train.patience);
  CHECK(a.train.factor == b.train.factor);
  CHECK(a.train.min_lr == b.train.min_lr);
  CHECK(a.train.log_every == b.train.log_every);
  CHECK(a.train.eval_samples == b.train.eval_samples);
  CHECK(a.train.seed == b.train.seed);
  CHECK(a.train.threads == b.train.threads);
  CHECK(a.train.curriculum == b.train.curriculum);
  CHECK(a.train.curriculum_advance == b.train.curriculum_advance);
  CHECK(a.train.target == b.train.target);
  CHECK(a.train.target_evals == b.train.target_evals);
  CHECK(a.train.adam_beta2 == b.train.adam_beta2);
  CHECK(a.train.weight_decay == b.train.weight_decay);
}

const char* kExample = R"(data: runs/data/copy
segments: 3
bptt: all
model: {kind: rmt, n_layer: 4, n_head: 4, d_head: 64, d_model: 128, d_inner: 256, dropout: 0.1, dropatt: 0.0, mem_len: 0, num_mem_tokens: 24, read_mem_from_cache: true}
train: {batch_size: 32, lr: 1.0e-4, schedule: plateau, warmup_steps: 0, clip: 0.25, max_steps: 250000, eval_every: 12000, patience: 8, factor: 0.5, min_lr: 1.0e-6, seed: 1, threads: 0}
)";

}  // namespace

TEST_CASE("config defaults are the header's values") {
  rmt::Config c;
  CHECK(c.data == "");
  CHECK(c.segments == 3);
  CHECK(c.bptt == -1);
  CHECK(c.bptt_recompute == false);
  CHECK(c.model.kind == "rmt");
  CHECK(c.model.n_layer == 4);
  CHECK(c.model.n_head == 4);
  CHECK(c.model.d_head == 64);
  CHECK(c.model.d_model == 128);
  CHECK(c.model.d_inner == 256);
  CHECK(c.model.dropout == 0.1);
  CHECK(c.model.dropatt == 0.0);
  CHECK(c.model.mem_len == 0);
  CHECK(c.model.num_mem_tokens == 24);
  CHECK(c.model.read_mem_from_cache == true);
  CHECK(c.model.n_token == 0);
  CHECK(c.train.batch_size == 32);
  CHECK(c.train.lr == 1.0e-4);
  CHECK(c.train.schedule == "plateau");
  CHECK(c.train.warmup_steps == 0);
  CHECK(c.train.clip == 0.25);
  CHECK(c.train.max_steps == 250000);
  CHECK(c.train.eval_every == 12000);
  CHECK(c.train.patience == 8);
  CHECK(c.train.factor == 0.5);
  CHECK(c.train.min_lr == 1.0e-6);
  CHECK(c.train.log_every == 100);
  CHECK(c.train.eval_samples == 0);
  CHECK(c.train.seed == 1);
  CHECK(c.train.threads == 0);
  // An empty file and an empty mapping are all defaults, and the defaults are valid.
  check_equal(rmt::parse_config("", "empty.yaml"), c);
  check_equal(rmt::parse_config("{}", "empty.yaml"), c);
  CHECK_NOTHROW(rmt::validate(c));
}

TEST_CASE("parse the example config; missing keys keep defaults") {
  rmt::Config c = rmt::parse_config(kExample, "config.yaml");
  CHECK(c.data == "runs/data/copy");
  CHECK(c.segments == 3);
  CHECK(c.bptt == -1);
  CHECK(c.model.kind == "rmt");
  CHECK(c.model.num_mem_tokens == 24);
  CHECK(c.train.lr == 1.0e-4);
  CHECK(c.train.min_lr == 1.0e-6);
  CHECK(c.train.max_steps == 250000);
  CHECK(c.train.log_every == 100);  // not in the file: default
  CHECK_NOTHROW(rmt::validate(c));

  rmt::Config d = rmt::parse_config(
      "segments: 5\nbptt: 2\nbptt_recompute: true\nmodel:\n  kind: xl\n  mem_len: 64\n"
      "train:\n  seed: 18446744073709551615\n  eval_samples: 500\n",
      "config.yaml");
  CHECK(d.segments == 5);
  CHECK(d.bptt == 2);
  CHECK(d.bptt_recompute);
  CHECK(d.model.kind == "xl");
  CHECK(d.model.mem_len == 64);
  CHECK(d.model.n_layer == 4);
  CHECK(d.train.seed == 18446744073709551615ull);
  CHECK(d.train.eval_samples == 500);
  CHECK(rmt::parse_config("bptt: 0", "c.yaml").bptt == 0);
}

TEST_CASE("load_config names the file in errors") {
  namespace fs = std::filesystem;
  fs::path file = fs::temp_directory_path() / "rmt_test_config.yaml";
  rmt::write_file_atomic(file, "model:\n  n_layers: 2\n");
  std::string message = error_of([&] { rmt::load_config(file.string()); });
  CHECK(contains(message, file.string() + ": unknown key 'model.n_layers'"));
  rmt::write_file_atomic(file, kExample);
  CHECK(rmt::load_config(file.string()).data == "runs/data/copy");
  fs::remove(file);
}

TEST_CASE("unknown keys name the origin and the closest valid key") {
  CHECK_THROWS_WITH_AS(rmt::parse_config("model: {n_layers: 2}", "config.yaml"),
                       "config.yaml: unknown key 'model.n_layers' (did you mean 'model.n_layer'?)",
                       rmt::Error);
  CHECK(contains(error_of([] { rmt::parse_config("train:\n  learning_rate: 0.1\n", "c.yaml"); }),
                 "unknown key 'train.learning_rate' (did you mean 'train.lr'?)"));
  CHECK(contains(error_of([] { rmt::parse_config("segmnts: 2", "c.yaml"); }),
                 "(did you mean 'segments'?)"));
  // A key put in the wrong place: the leaf name matches.
  CHECK(contains(error_of([] { rmt::parse_config("n_layer: 2", "c.yaml"); }),
                 "c.yaml: unknown key 'n_layer' (did you mean 'model.n_layer'?)"));
  CHECK(contains(error_of([] { rmt::parse_config("train: {mem_len: 2}", "c.yaml"); }),
                 "(did you mean 'model.mem_len'?)"));
  CHECK(contains(error_of([] { rmt::parse_config("modle: {kind: xl}", "c.yaml"); }),
                 "unknown key 'modle' (did you mean 'model'?)"));
  // A section given a scalar, a value given a mapping, a key given twice.
  CHECK(contains(error_of([] { rmt::parse_config("model: 3", "c.yaml"); }),
                 "'model' must be a mapping"));
  CHECK(contains(error_of([] { rmt::parse_config("segments: {a: 1}", "c.yaml"); }),
                 "invalid value (a mapping) for 'segments'"));
  CHECK(contains(error_of([] { rmt::parse_config("segments: 2\nsegments: 3\n", "c.yaml"); }),
                 "'segments' is given twice"));
}

TEST_CASE("wrong types and out-of-range values name key, value and what is allowed") {
  struct Case {
    const char* yaml;
    const char* expected;
  };
  const Case cases[] = {
      {"model: {n_layer: four}", "c.yaml: invalid value 'four' for 'model.n_layer': expected an integer >= 1"},
      {"model: {n_layer: 2.5}", "invalid value '2.5' for 'model.n_layer': expected an integer >= 1"},
      {"model: {n_head: 0}", "invalid value '0' for 'model.n_head': expected an integer >= 1"},
      {"model: {d_model: -128}", "invalid value '-128' for 'model.d_model'"},
      {"model: {d_inner: 99999999999}", "invalid value '99999999999' for 'model.d_inner'"},
      {"model: {mem_len: -1}", "invalid value '-1' for 'model.mem_len': expected a non-negative integer"},
      {"model: {dropout: 1.0}", "invalid value '1.0' for 'model.dropout': expected a number in [0, 1)"},
      {"model: {dropout: -0.1}", "invalid value '-0.1' for 'model.dropout'"},
      {"model: {dropout: high}", "invalid value 'high' for 'model.dropout'"},
      {"model: {dropout: 0.1x}", "invalid value '0.1x' for 'model.dropout'"},
      {"model: {dropatt: 1.5}", "invalid value '1.5' for 'model.dropatt': expected a number in [0, 1)"},
      {"model: {kind: gpt}", "invalid value 'gpt' for 'model.kind': expected one of baseline|mt|xl|rmt|xl_rmt"},
      {"model: {read_mem_from_cache: maybe}", "invalid value 'maybe' for 'model.read_mem_from_cache': expected true or false"},
      {"train: {lr: 0}", "invalid value '0' for 'train.lr': expected a number > 0"},
      {"train: {lr: -1.0e-4}", "invalid value '-1.0e-4' for 'train.lr': expected a number > 0"},
      {"train: {lr: .nan}", "invalid value '.nan' for 'train.lr'"},
      {"train: {schedule: linear}", "invalid value 'linear' for 'train.schedule': expected one of plateau|cosine|constant"},
      {"train: {batch_size: 0}", "invalid value '0' for 'train.batch_size': expected an integer >= 1"},
      {"train: {seed: -1}", "invalid value '-1' for 'train.seed': expected a non-negative integer"},
      {"train: {max_steps: }", "invalid value (empty) for 'train.max_steps'"},
      {"train: {factor: [1, 2]}", "invalid value (a list) for 'train.factor'"},
      {"segments: 0", "invalid value '0' for 'segments': expected an integer >= 1"},
      {"bptt: some", "invalid value 'some' for 'bptt': expected 'all' or a non-negative integer"},
      {"bptt: -1", "invalid value '-1' for 'bptt': expected 'all' or a non-negative integer"},
      {"data: [a, b]", "invalid value (a list) for 'data': expected a string"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.yaml);
    std::string message = error_of([&] { rmt::parse_config(c.yaml, "c.yaml"); });
    CAPTURE(message);
    CHECK(contains(message, c.expected));
  }
}

TEST_CASE("malformed YAML names the file and line") {
  std::string message = error_of([] {
    rmt::parse_config("data: x\nsegments: 3\nmodel: {kind: rmt\n", "bad.yaml");
  });
  CAPTURE(message);
  CHECK(contains(message, "bad.yaml: malformed YAML at line"));
  message = error_of([] { rmt::parse_config("data: x\nmodel:\n  kind: rmt\n n_layer: 2\n", "bad.yaml"); });
  CAPTURE(message);
  CHECK(contains(message, "bad.yaml: malformed YAML at line 4"));
  CHECK(contains(error_of([] { rmt::parse_config("- a\n- b\n", "list.yaml"); }),
                 "list.yaml: expected a mapping"));
}

TEST_CASE("apply_override sets one dotted key with the same checks") {
  rmt::Config c;
  rmt::apply_override(c, "model.kind=xl");
  CHECK(c.model.kind == "xl");
  rmt::apply_override(c, "model.mem_len=128");
  CHECK(c.model.mem_len == 128);
  rmt::apply_override(c, "train.lr=3e-4");
  CHECK(c.train.lr == 3e-4);
  rmt::apply_override(c, "bptt=2");
  CHECK(c.bptt == 2);
  rmt::apply_override(c, "bptt=all");
  CHECK(c.bptt == -1);
  rmt::apply_override(c, "data=runs/data/a b");
  CHECK(c.data == "runs/data/a b");
  rmt::apply_override(c, "model.n_head = 8");
  CHECK(c.model.n_head == 8);
  rmt::apply_override(c, "model.read_mem_from_cache=false");
  CHECK(c.model.read_mem_from_cache == false);
  rmt::apply_override(c, "model.mem_init=normal");
  CHECK(c.model.mem_init == "normal");
  CHECK_THROWS_WITH_AS(rmt::apply_override(c, "model.mem_init=zeros"),
                       doctest::Contains("expected one of original|normal"), rmt::Error);

  CHECK_THROWS_WITH_AS(rmt::apply_override(c, "model.n_layers=2"),
                       "--set model.n_layers=2: unknown key 'model.n_layers' (did you mean 'model.n_layer'?)",
                       rmt::Error);
  CHECK(contains(error_of([&] { rmt::apply_override(c, "model.kind=gpt"); }),
                 "invalid value 'gpt' for 'model.kind': expected one of baseline|mt|xl|rmt|xl_rmt"));
  CHECK(contains(error_of([&] { rmt::apply_override(c, "model.n_layer=four"); }),
                 "invalid value 'four' for 'model.n_layer'"));
  CHECK(contains(error_of([&] { rmt::apply_override(c, "model.n_layer="); }),
                 "invalid value (empty) for 'model.n_layer'"));
  CHECK(contains(error_of([&] { rmt::apply_override(c, "model.n_layer"); }), "expected key=value"));
  CHECK(contains(error_of([&] { rmt::apply_override(c, "model=3"); }),
                 "'model' is a section, not a value; set one of its keys, e.g. 'model.kind'"));
  CHECK(c.model.kind == "xl");  // failed overrides change nothing
  CHECK(c.model.n_layer == 4);
}

TEST_CASE("config: yaml-cpp's own failures and huge values are rmt errors naming the file or --set") {
  // Too deep for yaml-cpp: its recursion limit is reported as malformed YAML, not a crash.
  std::string deep = "model: " + std::string(5000, '[') + std::string(5000, ']') + "\n";
  CHECK(contains(error_of([&] { rmt::parse_config(deep, "deep.yaml"); }), "deep.yaml: malformed YAML"));
  CHECK(contains(error_of([&] { rmt::parse_config("model: {n_layer: 99999999999}", "c.yaml"); }),
                 "c.yaml: invalid value '99999999999' for 'model.n_layer': expected an integer >= 1 (at most 2147483647)"));
  CHECK(contains(error_of([&] { rmt::parse_config("train: {seed: 18446744073709551616}", "c.yaml"); }),
                 "expected a non-negative integer (at most 18446744073709551615)"));
  CHECK(contains(error_of([&] { rmt::parse_config("train: {lr: 1e999}", "c.yaml"); }), "invalid value '1e999' for 'train.lr'"));
  rmt::Config c;
  CHECK(error_of([&] { rmt::apply_override(c, " =3"); }) == "--set  =3: expected key=value, e.g. model.kind=xl");
  CHECK(contains(error_of([&] { rmt::apply_override(c, "model.kind={"); }), "--set model.kind={: malformed value"));
  CHECK(contains(error_of([&] { rmt::apply_override(c, "train.threads=" + std::string(5000, '[')); }),
                 "malformed value"));
}

TEST_CASE("validate checks cross-field requirements") {
  rmt::Config c;
  CHECK_NOTHROW(rmt::validate(c));

  c.model.kind = "xl";
  c.model.mem_len = 0;
  CHECK(contains(error_of([&] { rmt::validate(c); }), "model.kind xl needs model.mem_len > 0"));
  c.model.mem_len = 16;
  CHECK_NOTHROW(rmt::validate(c));

  c.model.kind = "xl_rmt";
  c.model.num_mem_tokens = 0;
  CHECK(contains(error_of([&] { rmt::validate(c); }), "model.kind xl_rmt needs model.num_mem_tokens > 0"));
  c.model.mem_len = 0;
  CHECK(contains(error_of([&] { rmt::validate(c); }), "needs model.mem_len > 0"));

  for (const char* kind : {"rmt", "mt"}) {
    c = rmt::Config();
    c.model.kind = kind;
    c.model.num_mem_tokens = 0;
    CHECK(contains(error_of([&] { rmt::validate(c); }), "needs model.num_mem_tokens > 0"));
  }
  c = rmt::Config();
  c.model.kind = "baseline";
  c.model.num_mem_tokens = 0;
  CHECK_NOTHROW(rmt::validate(c));

  c = rmt::Config();
  c.model.dropatt = 0.1;
  CHECK(contains(error_of([&] { rmt::validate(c); }), "dropatt > 0 is not supported yet"));

  c = rmt::Config();
  c.segments = 0;
  CHECK(contains(error_of([&] { rmt::validate(c); }), "segments"));

  // Per-key ranges also hold for configs built in code.
  c = rmt::Config();
  c.model.kind = "gpt";
  CHECK(contains(error_of([&] { rmt::validate(c); }), "model.kind = gpt: expected one of"));
  c = rmt::Config();
  c.train.lr = 0;
  CHECK(contains(error_of([&] { rmt::validate(c); }), "train.lr"));
  c = rmt::Config();
  c.model.n_head = -2;
  CHECK(contains(error_of([&] { rmt::validate(c); }), "model.n_head = -2"));
}

TEST_CASE("resolve_kind zeroes what the kind does not use") {
  struct Case {
    const char* kind;
    int mem_len, num_mem_tokens;
  };
  for (Case expected : {Case{"baseline", 0, 0}, Case{"xl", 32, 0}, Case{"rmt", 0, 10},
                        Case{"mt", 0, 10}, Case{"xl_rmt", 32, 10}}) {
    rmt::ModelConfig model;
    model.kind = expected.kind;
    model.mem_len = 32;
    model.num_mem_tokens = 10;
    rmt::resolve_kind(model);
    CAPTURE(expected.kind);
    CHECK(model.mem_len == expected.mem_len);
    CHECK(model.num_mem_tokens == expected.num_mem_tokens);
  }
}

TEST_CASE("to_yaml round-trips every field exactly") {
  check_equal(rmt::parse_config(rmt::to_yaml(rmt::Config()), "to_yaml"), rmt::Config());

  rmt::Config c;
  c.data = "runs/data/my data: v2 #1";  // needs quoting
  c.segments = 7;
  c.bptt = 3;
  c.bptt_recompute = true;
  c.model.kind = "xl_rmt";
  c.model.n_layer = 12;
  c.model.n_head = 8;
  c.model.d_head = 32;
  c.model.d_model = 256;
  c.model.d_inner = 1024;
  c.model.dropout = 0.1 + 0.2;  // 0.30000000000000004
  c.model.dropatt = 1.0 / 3.0;
  c.model.mem_len = 150;
  c.model.num_mem_tokens = 5;
  c.model.read_mem_from_cache = false;
  c.model.mem_init = "normal";
  c.model.n_token = 30000;
  c.train.batch_size = 64;
  c.train.lr = 2.5e-4 / 3.0;
  c.train.schedule = "cosine";
  c.train.warmup_steps = 1000;
  c.train.clip = 1e-300;
  c.train.max_steps = 5000000000;
  c.train.eval_every = 3000000000;
  c.train.patience = 3;
  c.train.factor = 0.7;
  c.train.min_lr = 0;
  c.train.log_every = 10;
  c.train.eval_samples = 256;
  c.train.seed = 18446744073709551615ull;
  c.train.threads = 2;
  std::string yaml = rmt::to_yaml(c);
  CAPTURE(yaml);
  check_equal(rmt::parse_config(yaml, "to_yaml"), c);

  for (const char* data : {"", "null", "~", "true", "123", "-x", "a'b\"c", "ünïcode/dir"}) {
    c.data = data;
    CAPTURE(data);
    CHECK(rmt::parse_config(rmt::to_yaml(c), "to_yaml").data == data);
  }

  // Every key appears, in config_keys() order.
  rmt::Config defaults;
  std::string text = rmt::to_yaml(defaults);
  size_t position = 0;
  for (const std::string& key : rmt::config_keys()) {
    if (key == "segment_length") continue;  // language models only
    // written only when used (their defaults leave run ids unchanged): tested below
    if (key == "train.curriculum_advance" || key == "train.target" || key == "train.target_evals" ||
        key == "train.adam_beta2" || key == "train.weight_decay" || key == "train.stop_unmastered" ||
        key == "model.d_mem" || key == "model.expand_v" || key == "model.short_conv" ||
        key == "model.delta_chunk")
      continue;
    std::string leaf = key.substr(key.rfind('.') + 1) + ":";
    size_t found = text.find(leaf, position);
    CAPTURE(key);
    CHECK(found != std::string::npos);
    position = found;
  }
  CHECK(contains(text, "bptt: all\n"));
  CHECK(contains(text, "  lr: 0.0001\n"));
  CHECK(contains(text, "  min_lr: 1.0e-06\n"));
}

TEST_CASE("a string key must be UTF-8: bytes yaml-cpp's emitter would rewrite are refused") {
  // "\xc0\xb2" is an overlong '2': written back it would read as "2" (found by fuzz_config)
  for (const char* bad : {"data: \xc0\xb2\n", "data: a\xff\n", "data: \xed\xa0\x80\n", "data: \xe2\x82\n"})
    CHECK_THROWS_WITH_AS(rmt::parse_config(bad, "t"), doctest::Contains("UTF-8"), rmt::Error);
  CHECK(rmt::parse_config("data: caf\xc3\xa9/\xe2\x82\xac\xf0\x9f\x98\x80\n", "t").data ==
        "caf\xc3\xa9/\xe2\x82\xac\xf0\x9f\x98\x80");
}

TEST_CASE("config_keys lists every key in file order") {
  std::vector<std::string> keys = rmt::config_keys();
  REQUIRE(keys.size() == 44);
  CHECK(keys.front() == "data");
  CHECK(keys[2] == "segment_length");
  CHECK(keys[3] == "bptt");
  CHECK(keys[5] == "device");
  CHECK(keys[6] == "model.kind");
  CHECK(keys[37] == "train.curriculum");
  CHECK(keys.back() == "train.weight_decay");
  CHECK(rmt::bptt_to_string(-1) == "all");
  CHECK(rmt::bptt_to_string(4) == "4");
}

TEST_CASE("model.d_mem: written only for armt (the other kinds' run ids stay as they were)") {
  rmt::Config plain;
  CHECK(!contains(rmt::to_yaml(plain), " d_mem:"));  // (read_mem_from_cache holds "d_mem")
  rmt::Config c;
  c.model.kind = "armt";
  c.model.d_mem = 12;
  const std::string yaml = rmt::to_yaml(c);
  CHECK(contains(yaml, "d_mem: 12"));
  CHECK(rmt::parse_config(yaml, "to_yaml").model.d_mem == 12);
}

TEST_CASE("model.expand_v, short_conv and delta_chunk: written only for the delta-rule kinds, round-tripped") {
  rmt::Config plain;
  CHECK(!contains(rmt::to_yaml(plain), "expand_v"));
  CHECK(!contains(rmt::to_yaml(plain), "short_conv"));
  CHECK(!contains(rmt::to_yaml(plain), "delta_chunk"));
  rmt::Config c;
  c.model.kind = "gated_deltanet";
  c.model.expand_v = 3;
  c.model.short_conv = 0;
  c.model.delta_chunk = 0;
  const std::string yaml = rmt::to_yaml(c);
  CHECK(contains(yaml, "expand_v: 3"));
  CHECK(contains(yaml, "short_conv: 0"));
  CHECK(contains(yaml, "delta_chunk: 0"));
  const rmt::Config back = rmt::parse_config(yaml, "to_yaml");
  CHECK(back.model.expand_v == 3);
  CHECK(back.model.short_conv == 0);
  CHECK(back.model.delta_chunk == 0);
  CHECK(rmt::parse_config("model:\n  kind: deltanet\n", "t").model.delta_chunk == 16);  // the default
  CHECK_THROWS_WITH_AS(rmt::parse_config("model:\n  kind: deltanet\n  short_conv: 65\n", "t"),
                       doctest::Contains("model.short_conv"), rmt::Error);
  CHECK_THROWS_WITH_AS(rmt::parse_config("model:\n  kind: deltanet\n  delta_chunk: -1\n", "t"),
                       doctest::Contains("model.delta_chunk"), rmt::Error);
}

TEST_CASE("the curriculum and stopping keys: written only when used, round-tripped when they are") {
  // Configs without them are as before (their run ids hash this text).
  rmt::Config plain;
  for (const char* key : {"curriculum_advance", "target"}) CHECK(!contains(rmt::to_yaml(plain), key));
  rmt::Config c;
  c.train.curriculum = 3;
  c.train.curriculum_advance = "mastery";
  c.train.target = 0.99;
  c.train.target_evals = 3;
  const std::string yaml = rmt::to_yaml(c);
  CHECK(contains(yaml, "  curriculum: 3\n  curriculum_advance: mastery\n  target: 0.99\n  target_evals: 3\n"));
  const rmt::Config back = rmt::parse_config(yaml, "t");
  CHECK(back.train.curriculum_advance == "mastery");
  CHECK(back.train.target == 0.99);
  CHECK(back.train.target_evals == 3);
  CHECK_NOTHROW(rmt::validate(back));
  CHECK(rmt::identity_yaml(back) != rmt::identity_yaml(plain));
}

TEST_CASE("train.adam_beta2: written only when changed, range-checked, and it reaches Adam") {
  rmt::Config plain;
  CHECK(!contains(rmt::to_yaml(plain), "adam_beta2"));
  rmt::Config c;
  c.train.adam_beta2 = 0.95;
  const std::string yaml = rmt::to_yaml(c);
  CHECK(contains(yaml, "  adam_beta2: 0.95\n"));
  CHECK(rmt::parse_config(yaml, "t").train.adam_beta2 == 0.95);
  CHECK(rmt::identity_yaml(c) != rmt::identity_yaml(plain));
  for (double bad : {0.0, 1.0, 1.5}) {
    c.train.adam_beta2 = bad;
    CAPTURE(bad);
    CHECK_THROWS_WITH(rmt::validate(c), doctest::Contains("train.adam_beta2"));
  }
}

TEST_CASE("train.weight_decay: written only when > 0, refused when negative or not finite") {
  rmt::Config plain;
  CHECK(!contains(rmt::to_yaml(plain), "weight_decay"));
  rmt::Config c;
  c.train.weight_decay = 0.01;
  const std::string yaml = rmt::to_yaml(c);
  CHECK(contains(yaml, "  weight_decay: 0.01\n"));
  CHECK(rmt::parse_config(yaml, "t").train.weight_decay == 0.01);
  CHECK(rmt::identity_yaml(c) != rmt::identity_yaml(plain));
  for (double bad : {-1e-3, std::nan(""), HUGE_VAL}) {
    c.train.weight_decay = bad;
    CAPTURE(bad);
    CHECK_THROWS_WITH(rmt::validate(c), doctest::Contains("train.weight_decay"));
  }
  CHECK_THROWS_WITH(rmt::parse_config("train:\n  weight_decay: -0.5\n", "bad.yaml"),
                    doctest::Contains("train.weight_decay"));
}

TEST_CASE("segment_length: a language model's config, written only when set") {
  // Algorithmic configs are as before (their run ids hash this text): no segment_length.
  rmt::Config algorithmic;
  CHECK(!contains(rmt::to_yaml(algorithmic), "segment_length"));
  CHECK(contains(rmt::to_yaml(algorithmic), "segments: 3\n"));
  CHECK(rmt::to_yaml(algorithmic).rfind("data: \"\"\nsegments: 3\nbptt: all\n", 0) == 0);

  rmt::Config lm = rmt::parse_config("segment_length: 128\nbptt: 2\nmodel: {kind: xl_rmt, mem_len: 64}\n", "lm.yaml");
  rmt::validate(lm);
  CHECK(rmt::config_family(lm).kind() == rmt::FamilyKind::text);
  const std::string yaml = rmt::to_yaml(lm);
  CAPTURE(yaml);
  CHECK(contains(yaml, "segment_length: 128\n"));
  CHECK(!contains(yaml, "segments:"));  // it does not apply
  check_equal(rmt::parse_config(yaml, "to_yaml"), lm);

  auto invalid = [](const std::string& text) {
    return error_of([&] { rmt::validate(rmt::parse_config(text, "c.yaml")); });
  };
  CHECK(contains(invalid("segment_length: 64\nsegments: 4\nbptt: 1\n"),
                 "segments 4 and segment_length 64 are both set"));
  CHECK(contains(invalid("segment_length: 64\nbptt: 1\ntrain: {curriculum: 3}\n"),
                 "train.curriculum 3 applies to algorithmic tasks"));
  CHECK(contains(invalid("segment_length: 64\nmodel: {kind: rmt}\n"),
                 "bptt all with segment_length 64: a language model's streams have no end"));
  CHECK(contains(invalid("segment_length: -1\n"), "segment_length"));
  // models without memory tokens have nothing to back-propagate through: bptt does not matter
  rmt::validate(rmt::parse_config("segment_length: 64\nmodel: {kind: xl, mem_len: 64}\n", "c.yaml"));
  rmt::validate(rmt::parse_config("segment_length: 64\nmodel: {kind: baseline}\n", "c.yaml"));
}

TEST_CASE("device: a backend's name, cpu by default, checked where the backend is taken") {
  rmt::Config c;
  CHECK(c.device == "cpu");
  CHECK(contains(rmt::to_yaml(c), "\ndevice: cpu\nmodel:\n"));
  // A device this build lacks is still a valid config (it may be meant for another machine).
  CHECK(rmt::parse_config("device: cuda", "c.yaml").device == "cuda");
  CHECK(rmt::parse_config("device: cpu-guarded", "c.yaml").device == "cpu-guarded");
  rmt::apply_override(c, "device=cuda");
  CHECK(c.device == "cuda");
  CHECK(rmt::parse_config(rmt::to_yaml(c), "to_yaml").device == "cuda");
  for (const char* bad : {"device: GPU", "device: \"\"", "device: [cpu]", "device: {a: 1}", "device: cu da",
                          "device: ../cpu"}) {
    CAPTURE(bad);
    const std::string message = error_of([&] { rmt::parse_config(bad, "c.yaml"); });
    CHECK(contains(message, "c.yaml: invalid value"));
    CHECK(contains(message, "for 'device': expected a device name (cpu"));
  }
  rmt::Config built;
  built.device = "Not A Name";
  CHECK(contains(error_of([&] { rmt::validate(built); }), "invalid config: device = Not A Name: expected a device name"));
}

TEST_CASE("identity_yaml: what a run computes (run ids); threads and a cpu device left out") {
  rmt::Config c;
  c.train.threads = 3;
  std::string full = rmt::to_yaml(c);
  const std::string identity = rmt::identity_yaml(c);
  // The text of every run id made before the device key existed: to_yaml without its line.
  CHECK_FALSE(contains(identity, "device"));
  full.erase(full.find("device: cpu\n"), std::string("device: cpu\n").size());
  full.replace(full.find("threads: 3"), 10, "threads: 0");
  CHECK(identity == full);
  c.train.threads = 1;
  CHECK(rmt::identity_yaml(c) == identity);  // the thread count is not identity
  c.device = "cuda";                           // another device computes other numbers: another run
  CHECK(contains(rmt::identity_yaml(c), "\ndevice: cuda\n"));
  CHECK(rmt::identity_yaml(c) != identity);
  c.model.n_layer = 3;
  c.device = "cpu";
  CHECK(rmt::identity_yaml(c) != identity);
}

TEST_CASE("same_config_text: a config.yaml written before a key existed reads as its default") {
  rmt::Config c;
  std::string text = rmt::to_yaml(c);
  std::string old = text;
  old.erase(old.find("device: cpu\n"), std::string("device: cpu\n").size());
  CHECK(rmt::same_config_text(old, text));
  CHECK(rmt::same_config_text(text, text));
  c.device = "cuda";
  CHECK_FALSE(rmt::same_config_text(old, rmt::to_yaml(c)));
  c.device = "cpu";
  c.train.seed = 2;
  CHECK_FALSE(rmt::same_config_text(old, rmt::to_yaml(c)));
  CHECK_FALSE(rmt::same_config_text("x: [", text));        // does not parse
  CHECK_FALSE(rmt::same_config_text("unknown: 1\n", text));  // not a config of this rmt
}
