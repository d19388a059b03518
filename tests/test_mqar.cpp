// Zoology's MQAR (tasks/mqar.h) and targets anywhere in a sequence: the generator's invariants and
// determinism, `rmt data check` catching corrupted files, the loss, accuracy and exact match over
// the scored positions only, and a tiny model learning MQAR far above chance.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/core/engine.h"
#include "lib/core/optim.h"
#include "lib/core/random.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "lib/run/evaluate.h"
#include "tasks/dataset.h"
#include "tasks/family.h"
#include "tasks/generate.h"
#include "tasks/mqar.h"
#include "tasks/task_kind.h"
#include "tests/cli.h"

using namespace rmt;
namespace fs = std::filesystem;

namespace {

TaskOptions mqar(int vocab, int length, int pairs, const char* filler = "random", const char* power_a = nullptr) {
  TaskArgs a;
  a.vocab_size = vocab, a.length = length, a.pairs = pairs, a.filler = filler;
  if (power_a) a.power_a = power_a;
  return resolve_task("mqar", a);
}

std::string generate(const TaskOptions& t, const std::string& name, uint64_t seed, SplitSizes sizes = {300, 40, 40}) {
  GenerateRequest g;
  g.task = t;
  g.sizes = sizes;
  g.seed = seed;
  g.out_dir = fresh_tmp("mqar", name);
  generate_dataset(g);
  return g.out_dir;
}

struct OneThread {
  int saved = num_threads();
  OneThread() { set_num_threads(1); }
  ~OneThread() { set_num_threads(saved); }
};

ModelConfig tiny_model(int vocab, const char* kind = "baseline") {
  ModelConfig c;
  c.kind = kind;
  c.n_token = vocab;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_head = 16;
  c.d_model = 32;
  c.d_inner = 64;
  c.dropout = 0;
  c.mem_init = "normal";
  c.num_mem_tokens = std::string(kind) == "rmt" ? 2 : 0;
  return c;
}

}  // namespace

TEST_CASE("mqar draws: Zoology's layout, keys and values in their halves, each key queried once at an even offset") {
  for (const char* filler : {"random", "zero"}) {
    CAPTURE(filler);
    const TaskOptions t = mqar(64, 32, 5, filler);
    const int K = 32, q0 = 10;
    TaskRng rng(3);
    std::vector<int64_t> x(32), y(32);
    for (int s = 0; s < 200; ++s) {
      draw_sample(t, rng, x.data(), y.data());
      std::set<int64_t> keys, values;
      for (int i = 0; i < 5; ++i) {
        CHECK((x[2 * i] >= 1 && x[2 * i] < K));
        CHECK((x[2 * i + 1] >= K && x[2 * i + 1] < 64));
        keys.insert(x[2 * i]), values.insert(x[2 * i + 1]);
        CHECK(y[2 * i] == -1);
        CHECK(y[2 * i + 1] == -1);
      }
      CHECK(keys.size() == 5);  // distinct keys, distinct values (numpy's replace=False)
      CHECK(values.size() == 5);
      int queries = 0;
      for (int p = q0; p < 32; ++p) {
        if (y[p] < 0) {  // filler: never a key of the sample; zero: id 0
          CHECK(keys.count(x[p]) == 0);
          if (std::string(filler) == "zero") CHECK(x[p] == 0);
          continue;
        }
        ++queries;
        CHECK((p - q0) % 2 == 0);
        const int pair = int(std::find(x.begin(), x.begin() + 10, x[p]) - x.begin());
        REQUIRE(pair < 10);
        CHECK(pair % 2 == 0);
        CHECK(y[p] == x[pair + 1]);  // the target: the value paired with the query key
      }
      CHECK(queries == 5);
    }
  }
}

TEST_CASE("mqar power law: a = 0.01 puts the queries near the pairs, a = 1 spreads them evenly") {
  auto mean_gap = [](const char* a) {
    const TaskOptions t = mqar(256, 128, 4, "zero", a);
    TaskRng rng(5);
    std::vector<int64_t> x(128), y(128);
    double sum = 0;
    int n = 0;
    for (int s = 0; s < 2000; ++s) {
      draw_sample(t, rng, x.data(), y.data());
      for (int p = 8; p < 128; ++p)
        if (y[p] >= 0) sum += (p - 8) / 2, ++n;
    }
    return sum / n;
  };
  const double skewed = mean_gap("0.01"), uniform = mean_gap("1");
  MESSAGE("mean gap: power_a 0.01 ", skewed, ", power_a 1 ", uniform, " (60 gaps)");
  CHECK(uniform == doctest::Approx(29.5).epsilon(0.05));  // four distinct of 0..59, uniformly
  CHECK(skewed < 0.75 * uniform);
}

TEST_CASE("mqar: the same seed gives byte-identical files, another seed differs; data check OK") {
  const TaskOptions t = mqar(64, 32, 4);
  const std::string a = generate(t, "a", 7), b = generate(t, "b", 7), c = generate(t, "c", 8);
  for (const char* split : kSplits)
    for (const char* which : {"X", "y"}) {
      const std::string fa = read_file(dataset_file(a, "mqar", split, which));
      CHECK(fa == read_file(dataset_file(b, "mqar", split, which)));
      CHECK(fa != read_file(dataset_file(c, "mqar", split, which)));
    }
  CHECK(read_file(fs::path(a) / "meta.yaml") == read_file(fs::path(b) / "meta.yaml"));
  const CheckResult r = check_dataset(a);
  CHECK(r.ok);
  CHECK(r.summary.size() == 3);
  const DatasetMeta meta = load_dataset_meta(a);
  CHECK(meta.unscored_targets);
  CHECK(!meta.stacked);
  CHECK(meta.answer_size == 32);
  CHECK(meta.vocab.size() == 64);
  CHECK(meta.power_a == "0.01");
  CHECK(meta.filler == "random");
  const std::vector<std::string> shown = show_dataset(a, ShowRequest{});
  REQUIRE(shown.size() == 6);
  CHECK(shown[1].find("queries @") != std::string::npos);
  for (const std::string& d : {a, b, c}) fs::remove_all(d);
}

TEST_CASE("mqar data check: a wrong target, a scored filler, a stray key, an id of -2 are each caught") {
  const std::string dir = generate(mqar(64, 32, 4), "broken", 1);
  REQUIRE(check_dataset(dir).ok);
  const std::string x_path = dataset_file(dir, "mqar", "val", "X"), y_path = dataset_file(dir, "mqar", "val", "y");
  int64_t n, cols;
  const std::vector<int64_t> X0 = read_npy_int_matrix(x_path, n, cols), Y0 = read_npy_int_matrix(y_path, n, cols);
  const int64_t* y2 = Y0.data() + 2 * cols;
  const int query = int(std::find_if(y2 + 8, y2 + cols, [](int64_t v) { return v >= 0; }) - y2);
  const int filler = int(std::find(y2 + 8, y2 + cols, int64_t(-1)) - y2);
  auto violation = [&](auto edit) {
    std::vector<int64_t> X = X0, Y = Y0;
    edit(X.data() + 2 * cols, Y.data() + 2 * cols);
    write_npy_int64(x_path, {n, cols}, X.data());
    write_npy_int64(y_path, {n, cols}, Y.data());
    const CheckResult r = check_dataset(dir);
    write_npy_int64(x_path, {n, cols}, X0.data());
    write_npy_int64(y_path, {n, cols}, Y0.data());
    CHECK(!r.ok);
    std::string all;  // the sha256 sums' violations, then the row's
    for (const std::string& line : r.violations) all += line + "\n";
    return all;
  };
  std::string v = violation([&](int64_t*, int64_t* y) { y[query] = y[query] == 63 ? 62 : y[query] + 1; });
  CHECK(v.find("row 2: y[" + std::to_string(query) + "] = ") != std::string::npos);
  CHECK(v.find("expected") != std::string::npos);
  v = violation([&](int64_t*, int64_t* y) { y[filler] = 40; });  // an unscored position scored
  CHECK(v.find("y[" + std::to_string(filler) + "] = 40, expected -1") != std::string::npos);
  v = violation([&](int64_t* x, int64_t*) { x[filler] = x[0]; });  // the first key again, as filler
  CHECK(v.find("mqar_val_X.npy row 2") != std::string::npos);
  CHECK(v.find("key " + std::to_string(X0[2 * cols])) != std::string::npos);
  v = violation([&](int64_t*, int64_t* y) { y[filler] = -2; });
  CHECK(v.find("y[" + std::to_string(filler) + "] = -2 outside the vocabulary") != std::string::npos);
  v = violation([&](int64_t* x, int64_t*) { std::swap(x[0], x[1]); });  // a value where a key belongs
  CHECK(v.find("is not a key id") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("mqar options: impossible ones are refused, naming the option and the limit") {
  CHECK(error_of([] { mqar(64, 31, 4); }).find("--length 31 must be even") != std::string::npos);
  CHECK(error_of([] { mqar(64, 32, 9); }).find("--pairs 9 is too many for --length 32") != std::string::npos);
  CHECK(error_of([] { mqar(8, 32, 4); }).find("--pairs 4 is too many for --vocab-size 8") != std::string::npos);
  CHECK(error_of([] { mqar(64, 32, 4, "zoology"); }).find("issue #29") != std::string::npos);
  CHECK(error_of([] { mqar(64, 32, 4, "random", "-1"); }).find("--power-a '-1' must be a number") != std::string::npos);
  CHECK(mqar(64, 32, 4, "random", "0.010").power_a == "0.01");  // one spelling in meta.yaml
}

TEST_CASE("an unscored target (-1) inside the answer: the loss is the mean over the scored positions") {
  OneThread one;
  constexpr int V = 7, T = 8, B = 5;
  Model model(tiny_model(V, "rmt"));
  model.init_weights(4);
  Engine engine(model, cpu_backend());
  const std::vector<int> seg_len{5, 3};
  SplitMixRng rng(21);
  std::vector<int32_t> input(B * T), target(B * T);
  for (int i = 0; i < B * T; ++i) input[size_t(i)] = int32_t(rng.below(V)), target[size_t(i)] = int32_t(rng.below(V));
  // Every answer position scored: the loss scale of before masks, bit for bit.
  forward_loss(engine, input.data(), target.data(), B, T, seg_len, 6, false, 0);
  CHECK(engine.loss_scale() == 1.f / float(B * 6));
  // Positions unscored throughout the rows (and one row's first answer position).
  std::vector<int32_t> masked = target;
  int scored = 0;
  for (int i = 0; i < B * T; ++i)
    if (i % T >= 2 && (i % 3 == 0 || i == 2)) masked[size_t(i)] = -1;
  for (int i = 0; i < B * T; ++i) scored += i % T >= 2 && masked[size_t(i)] >= 0;
  const double loss = forward_loss(engine, input.data(), masked.data(), B, T, seg_len, 6, false, 0);
  CHECK(engine.loss_scale() == 1.f / float(scored));
  double by_hand = 0;
  for (int s = 0, t0 = 0; s < 2; t0 += seg_len[size_t(s)], ++s) {
    const std::vector<float> logits = engine.logits(s);  // [B, Ts, V]
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < seg_len[size_t(s)]; ++j) {
        const int p = t0 + j, y = masked[size_t(b * T + p)];
        if (p < 2 || y < 0) continue;
        const float* row = logits.data() + (size_t(b) * seg_len[size_t(s)] + j) * V;
        double z = 0, mx = *std::max_element(row, row + V);
        for (int v = 0; v < V; ++v) z += std::exp(double(row[v]) - mx);
        by_hand += mx + std::log(z) - row[y];
      }
  }
  CHECK(loss == doctest::Approx(by_hand / scored).epsilon(1e-5));
  // An unscored target inside the answer is the same as its position outside the answer: position
  // 2 of every row unscored with answer_size 6, against answer_size 5 (positions 3..7): the same
  // loss and gradients, bit for bit.
  std::vector<int32_t> first_masked = target;
  for (int b = 0; b < B; ++b) first_masked[size_t(b * T + 2)] = -1;
  const double in_answer = forward_loss(engine, input.data(), first_masked.data(), B, T, seg_len, 6, false, 0);
  engine.backward(-1);
  const std::vector<float> grads_in = model.grads.download();
  const double outside = forward_loss(engine, input.data(), target.data(), B, T, seg_len, 5, false, 0);
  engine.backward(-1);
  CHECK(in_answer == outside);
  CHECK(grads_in == model.grads.download());
}

TEST_CASE("evaluation with unscored targets: accuracy, exact match and loss over the scored positions only") {
  OneThread one;
  constexpr int V = 3, T = 8, N = 40;
  Model model(tiny_model(V));
  model.init_weights(9);
  Engine engine(model, cpu_backend());
  SampleSplit split;
  split.n = N;
  split.seq_len = T;
  SplitMixRng rng(5);
  for (int i = 0; i < N * T; ++i) {
    split.input.push_back(int32_t(rng.below(V)));
    // one or two scored positions a row, at varying places (the counts differ from row to row)
    const int p = i % T, row = i / T;
    split.target.push_back(p == row % T || (row % 3 == 0 && p == 7 - row % 4) ? int32_t(rng.below(V)) : -1);
  }
  EvalOptions opt;
  opt.seg_len = {4, 4};
  opt.answer_size = T;
  opt.unscored_targets = true;
  opt.batch_size = 7;  // uneven batches: the loss must still be the mean over every scored position
  int64_t right = 0, scored = 0, exact = 0;
  opt.on_predictions = [&](int64_t start, int B, const int32_t*, const int32_t* target, const int32_t* pred) {
    for (int b = 0; b < B; ++b) {
      bool all = true;
      for (int p = 0; p < T; ++p) {
        const int64_t i = int64_t(b) * T + p;
        CHECK(split.target[size_t((start + b) * T + p)] == target[i]);
        if (target[i] < 0) {
          CHECK(pred[i] == -1);  // nothing predicted where nothing is scored
          continue;
        }
        ++scored;
        right += pred[i] == target[i];
        all = all && pred[i] == target[i];
      }
      exact += all;
    }
  };
  const EvalResult r = evaluate(engine, split, opt);
  CHECK(r.acc_teacher_forced == double(right) / double(scored));
  REQUIRE(r.acc_free_running.has_value());
  CHECK(*r.acc_free_running == r.acc_teacher_forced);  // every scored input is given: no decoding
  CHECK(*r.exact_match == double(exact) / N);
  CHECK(*r.exact_match_teacher_forced == double(exact) / N);
  const double whole = forward_loss(engine, split.input.data(), split.target.data(), N, T, opt.seg_len, T, false, 0);
  CHECK(r.loss == doctest::Approx(whole).epsilon(1e-6));
  MESSAGE("untrained: accuracy ", r.acc_teacher_forced, " over ", scored, " scored positions, exact ", *r.exact_match);
}

TEST_CASE("a tiny model learns mqar far above chance (dataset -> training -> rmt train and rmt eval)") {
  OneThread one;
  const std::string dir = generate(mqar(32, 16, 2), "learn", 0, {4000, 200, 200});
  const DatasetMeta meta = load_dataset_meta(dir);
  const SampleSplit train = load_sample_split(dir, meta, "train"), test = load_sample_split(dir, meta, "test");
  Model model(tiny_model(32));
  model.init_weights(1);
  Engine engine(model, cpu_backend());
  Adam adam(cpu_backend(), model.num_params());
  const std::vector<int> seg_len{16};
  constexpr int B = 32;
  for (int step = 0; step < 1500; ++step) {
    const int64_t at = (int64_t(step) * B) % (train.n - B);
    forward_loss(engine, train.input.data() + at * 16, train.target.data() + at * 16, B, 16, seg_len, 16, true,
                 uint64_t(step));
    engine.backward(-1);
    clip_grad_norm(cpu_backend(), model.grads, 1.0);
    adam.step(cpu_backend(), model.params, model.grads, 3e-3f);
  }
  EvalOptions opt;
  opt.seg_len = seg_len;
  opt.answer_size = 16;
  opt.unscored_targets = true;
  const EvalResult r = evaluate(engine, test, opt);
  MESSAGE("mqar V 32, length 16, 2 pairs, baseline 2x32, 1500 steps: accuracy ", r.acc_teacher_forced,
          ", exact match ", *r.exact_match, " (chance 1/16 of the values)");
  CHECK(r.acc_teacher_forced > 0.9);

  // The same through the commands: rmt train and rmt eval --predictions.
  const std::string run = fresh_tmp("mqar", "run"), config = dir + "/t.yaml";
  write_file_atomic(config, "data: " + dir + "\nsegments: 1\n"
                    "model: {kind: baseline, n_layer: 2, n_head: 2, d_head: 16, d_model: 32, d_inner: 64, dropout: 0.0}\n"
                    "train: {batch_size: 32, lr: 3.0e-3, schedule: constant, max_steps: 300, eval_every: 300, threads: 1}\n");
  const Run trained = rmt_run("train --config " + config + " --out " + run);
  REQUIRE(trained.status == 0);
  const Run ev = rmt_run("eval " + run + " --split test --predictions " + run + "/pred.jsonl", true);
  REQUIRE(ev.status == 0);
  const auto j = nlohmann::json::parse(ev.output);
  CHECK(j["acc_teacher_forced"].get<double>() > 0.3);
  const std::string first = read_file(run + "/pred.jsonl").substr(0, read_file(run + "/pred.jsonl").find('\n'));
  const auto line = nlohmann::json::parse(first);
  CHECK(line["positions"].size() == 2);  // the two queries
  CHECK(line["input"].get<std::string>().size() > 16);  // the whole row shown
  fs::remove_all(dir);
  fs::remove_all(run);
}
