// MAD's synthetic tasks (tasks/mad.h): each generator's layout and targets recomputed here from the
// row by the rule of mad-lab's mad/data/instances.py, the defaults of its configs, determinism,
// `rmt data check` catching corrupted rows, bad options refused with their reason.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset.h"
#include "tasks/family.h"
#include "tasks/generate.h"
#include "tasks/mad.h"
#include "tasks/task_kind.h"
#include "tests/cli.h"

using namespace rmt;
namespace fs = std::filesystem;

namespace {

std::string generate(const TaskOptions& t, const std::string& name, uint64_t seed, SplitSizes sizes = {200, 30, 30}) {
  GenerateRequest g;
  g.task = t;
  g.sizes = sizes;
  g.seed = seed;
  g.out_dir = fresh_tmp("mad", name);
  generate_dataset(g);
  return g.out_dir;
}

// Rows drawn as generate draws them.
struct Rows {
  std::vector<std::vector<int64_t>> x, y;
};
Rows draw(const TaskOptions& t, int n, uint64_t seed) {
  TaskRng rng(seed);
  Rows r;
  for (int s = 0; s < n; ++s) {
    std::vector<int64_t> x(size_t(task_len_x(t))), y(size_t(task_len_y(t)));
    draw_sample(t, rng, x.data(), y.data());
    r.x.push_back(x), r.y.push_back(y);
  }
  return r;
}

// One violation line of `rmt data check` after `edit` changes row 1 of the val split.
std::string violation_after(const std::string& dir, const std::string& prefix,
                            const std::function<void(int64_t* x, int64_t* y)>& edit) {
  const std::string x_path = dataset_file(dir, prefix, "val", "X"), y_path = dataset_file(dir, prefix, "val", "y");
  int64_t n, cx, cy;
  const std::vector<int64_t> X0 = read_npy_int_matrix(x_path, n, cx), Y0 = read_npy_int_matrix(y_path, n, cy);
  std::vector<int64_t> X = X0, Y = Y0;
  edit(X.data() + cx, Y.data() + cy);
  write_npy_int64(x_path, {n, cx}, X.data());
  write_npy_int64(y_path, {n, cy}, Y.data());
  const CheckResult r = check_dataset(dir);
  write_npy_int64(x_path, {n, cx}, X0.data());
  write_npy_int64(y_path, {n, cy}, Y0.data());
  CHECK(!r.ok);
  std::string all;
  for (const std::string& line : r.violations) all += line + "\n";
  return all;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("mad tasks: mad-lab's baselines by default, aligned rows, -1 unscored") {
  struct Want {
    const char* task;
    int vocab, length, columns;
  };
  for (const Want& w : {Want{"mad_recall", 16, 128, 127}, Want{"mad_noisy_recall", 32, 128, 127},
                        Want{"mad_fuzzy_recall", 16, 128, 128}, Want{"mad_selective_copy", 16, 256, 256},
                        Want{"mad_memorization", 256, 32, 32}}) {
    const std::string task_name = w.task;
    CAPTURE(task_name);
    const TaskOptions t = resolve_task(w.task, TaskArgs{});
    CHECK(t.vocab_size == w.vocab);
    CHECK(t.length == w.length);
    CHECK(task_len_x(t) == w.columns);
    CHECK(task_len_y(t) == w.columns);
    CHECK(task_answer_size(t) == w.columns);
    CHECK(!task_stacked(t));
    CHECK(task_unscored_targets(t));
    CHECK(task_vocab(t).size() == size_t(w.vocab));
    CHECK(default_split_sizes(t).train == (std::string(w.task) == "mad_memorization" ? 256 : 12800));
  }
  const TaskOptions noisy = resolve_task("mad_noisy_recall", TaskArgs{});
  CHECK(noisy.noise_vocab_size == 16);
  CHECK(noisy.frac_noise == "0.2");
  const TaskOptions fuzzy = resolve_task("mad_fuzzy_recall", TaskArgs{});
  CHECK(fuzzy.k_motif_size == 3);
  CHECK(fuzzy.v_motif_size == 3);
  CHECK(resolve_task("mad_selective_copy", TaskArgs{}).tokens_to_copy == 16);
  CHECK(resolve_task("mad_memorization", TaskArgs{}).kv_map_seed == 12345);
}

TEST_CASE("mad_recall / mad_noisy_recall: pairs k v, a key's value fixed, each key seen before scored with its value") {
  for (const char* task : {"mad_recall", "mad_noisy_recall"}) {
    const std::string task_name = task;
    CAPTURE(task_name);
    const TaskOptions t = resolve_task(task, TaskArgs{});
    const int64_t plain = t.vocab_size - t.noise_vocab_size, K = plain / 2;
    const Rows rows = draw(t, 300, 11);
    int64_t noise_pairs = 0, loop_pairs = 0, scored = 0;
    for (size_t s = 0; s < rows.x.size(); ++s) {
      const std::vector<int64_t>& x = rows.x[s];
      const std::vector<int64_t>& y = rows.y[s];
      const int len = int(x.size());
      std::map<int64_t, int64_t> value_of;
      for (int p = 0; p < len; p += 2) {
        const bool seen = value_of.count(x[p]) > 0;
        if (p + 1 < len) ++loop_pairs;
        if (x[p] >= plain) {  // a noise pair: both noise ids, nothing scored
          ++noise_pairs;
          REQUIRE(p + 1 < len);
          CHECK(x[p + 1] >= plain);
          CHECK(y[p] == -1);
        } else {
          REQUIRE(x[p] < K);
          if (p + 1 < len) {
            CHECK((x[p + 1] >= K && x[p + 1] < plain));
            if (seen) CHECK(value_of[x[p]] == x[p + 1]);
            value_of.emplace(x[p], x[p + 1]);
          }
          // scored exactly where the key came before, with its (first) value
          CHECK(y[p] == (seen ? value_of[x[p]] : -1));
          scored += seen;
        }
        if (p + 1 < len) CHECK(y[p + 1] == -1);
      }
      CHECK(y[size_t(len - 1)] >= 0);  // the query: always a key shown before
    }
    CHECK(scored > 300);
    const double frac = double(noise_pairs) / double(loop_pairs);
    MESSAGE(task_name, ": noise in ", frac, " of the pairs");
    // one pair a sample is kept free of noise: frac_noise * (pairs - 1) / pairs of them
    CHECK(frac == doctest::Approx(mad_frac_noise(t) * 62 / 63).epsilon(0.05));
  }
}

TEST_CASE("mad_fuzzy_recall: left padding, motifs of 1..3 distinct ids, values scored one position early") {
  const TaskOptions t = resolve_task("mad_fuzzy_recall", TaskArgs{});
  const int64_t pad = 15, K = 7;  // N = 16 - 1: keys 0..6, values 7..14
  const Rows rows = draw(t, 300, 5);
  std::set<size_t> key_sizes, value_sizes;
  for (size_t s = 0; s < rows.x.size(); ++s) {
    const std::vector<int64_t>& x = rows.x[s];
    const std::vector<int64_t>& y = rows.y[s];
    const int L = int(x.size());
    int p = 0;
    while (x[size_t(p)] == pad) CHECK(y[size_t(p++)] == -1);
    CHECK(p >= 2);
    CHECK(y[size_t(L - 1)] >= K);  // the query's last value id, a target only
    CHECK(y[size_t(L - 1)] < pad);
    for (int q = p; q < L - 1; ++q)
      if (y[size_t(q)] >= 0) CHECK(y[size_t(q)] == x[size_t(q + 1)]);  // the next id, a value id
    // the runs: key, value, key, value ... (no noise at frac_noise 0), sizes 1..3, distinct ids
    std::map<std::vector<int64_t>, std::vector<int64_t>> value_of;
    while (p < L) {
      const int a = p;
      while (p < L && x[size_t(p)] < K) ++p;
      const int b = p;
      while (p < L && x[size_t(p)] >= K && x[size_t(p)] < pad) ++p;
      REQUIRE(b > a);
      const std::vector<int64_t> key(x.begin() + a, x.begin() + b), value(x.begin() + b, x.begin() + p);
      CHECK(std::set<int64_t>(key.begin(), key.end()).size() == key.size());
      key_sizes.insert(key.size());
      const bool seen = value_of.count(key) > 0;
      if (p < L) {
        value_sizes.insert(value.size());
        if (seen) CHECK(value_of[key] == value);
        value_of.emplace(key, value);
      } else {
        REQUIRE(seen);  // the final query: its value one id short
        CHECK(value_of[key].size() == value.size() + 1);
      }
      for (int q = a; q < b - 1; ++q) CHECK(y[size_t(q)] == -1);  // within a key nothing is scored
      CHECK((y[size_t(b - 1)] >= 0) == seen);                         // its last id predicts the value
    }
  }
  CHECK(key_sizes == std::set<size_t>{1, 2, 3});
  CHECK(value_sizes == std::set<size_t>{1, 2, 3});
}

TEST_CASE("mad_fuzzy_recall target: a row written by hand") {
  TaskArgs a;
  a.vocab_size = 16, a.length = 14, a.k_motif_size = 2, a.v_motif_size = 2;
  const TaskOptions t = resolve_task("mad_fuzzy_recall", a);
  // pads, (1 2)->(9 10), (3)->(11), (1 2)->(9 10) again, the query (3) whose value 11 is y's alone
  const std::vector<int64_t> x = {15, 15, 15, 15, 1, 2, 9, 10, 3, 11, 1, 2, 9, 10};
  std::vector<int64_t> y(14, -2), want(14, -1);
  want[11] = 9, want[12] = 10;  // the key's last id predicts the value's first, and so on
  CHECK(mad_fuzzy_row_problem(t, DatasetMeta{}, x.data(), nullptr) != "");  // ends in a value, not a query
  target_from_x(t, x.data(), y.data());
  CHECK(y == want);
  const std::vector<int64_t> q = {15, 15, 15, 1, 2, 9, 10, 3, 11, 1, 2, 9, 10, 3};
  target_from_x(t, q.data(), y.data());
  want.assign(14, -1);
  want[10] = 9, want[11] = 10, want[13] = 11;
  CHECK(y == want);
  CHECK(mad_fuzzy_row_problem(t, DatasetMeta{}, q.data(), nullptr) == "");
  std::vector<int64_t> bad = q;
  bad[12] = 12;  // (1 2) now has another value than before
  CHECK(has(mad_fuzzy_row_problem(t, DatasetMeta{}, bad.data(), nullptr), "another value"));
}

TEST_CASE("mad_selective_copy: the tokens among blanks, the copy token, then the tokens as targets") {
  const TaskOptions t = resolve_task("mad_selective_copy", TaskArgs{});
  const int n = 16, L = 256;
  const int64_t blank = 14, copy = 15;
  const Rows rows = draw(t, 200, 2);
  int leading_blanks = 0;
  for (size_t s = 0; s < rows.x.size(); ++s) {
    const std::vector<int64_t>& x = rows.x[s];
    const std::vector<int64_t>& y = rows.y[s];
    std::vector<int64_t> tokens;
    for (int p = 0; p < L - n - 1; ++p)
      if (x[size_t(p)] != blank) tokens.push_back(x[size_t(p)]);
    REQUIRE(tokens.size() == size_t(n));
    for (int64_t id : tokens) CHECK(id < blank);
    CHECK(x[size_t(L - n - 2)] != blank);  // np.insert never puts a blank after the last token
    CHECK(x[size_t(L - n - 1)] == copy);
    leading_blanks += x[0] == blank;
    for (int p = 0; p < L - n; ++p) CHECK(y[size_t(p)] == -1);
    for (int i = 0; i < n; ++i) {
      CHECK(x[size_t(L - n + i)] == blank);
      CHECK(y[size_t(L - n + i)] == tokens[size_t(i)]);
    }
  }
  CHECK(leading_blanks > 150);  // 223 blanks over 16 gaps: the first gap is rarely empty
}

TEST_CASE("mad_memorization: one map from kv_map_seed for every sample and seed, scored at the insert token") {
  const TaskOptions t = resolve_task("mad_memorization", TaskArgs{});
  const int64_t K = 127, insert = 255;  // N = 255: keys 0..126, values 127..254
  std::map<int64_t, int64_t> value_of;
  for (uint64_t seed : {1, 2}) {
    const Rows rows = draw(t, 100, seed);
    for (size_t s = 0; s < rows.x.size(); ++s)
      for (int p = 0; p < 32; p += 2) {
        const int64_t k = rows.x[s][size_t(p)];
        REQUIRE(k < K);
        CHECK(rows.x[s][size_t(p + 1)] == insert);
        CHECK(rows.y[s][size_t(p)] == -1);
        const int64_t v = rows.y[s][size_t(p + 1)];
        CHECK((v >= K && v < insert));
        const auto [it, fresh] = value_of.emplace(k, v);
        CHECK(it->second == v);  // the same key, the same value, across samples and seeds
      }
  }
  std::set<int64_t> values;
  for (auto [k, v] : value_of) values.insert(v);
  CHECK(values.size() == value_of.size());  // an injection: zip of the shuffled keys and values
  CHECK(value_of.size() > 120);
  TaskArgs other;
  other.kv_map_seed = 7;
  const std::vector<int64_t> a = mad_memo_map(t), b = mad_memo_map(resolve_task("mad_memorization", other));
  CHECK(a != b);
  for (auto [k, v] : value_of) CHECK(a[size_t(k)] == v);
}

TEST_CASE("mad tasks: the same seed gives byte-identical files, another seed differs; data check OK") {
  auto small = [](const char* task) {
    TaskArgs a;
    a.length = std::string(task) == "mad_memorization" ? 16 : 40;
    if (std::string(task) == "mad_selective_copy") a.tokens_to_copy = 6;
    if (std::string(task) == "mad_fuzzy_recall") a.k_motif_size = 2, a.v_motif_size = 2;
    if (std::string(task) == "mad_noisy_recall") a.frac_noise = "0.4";
    return resolve_task(task, a);
  };
  for (const char* task : {"mad_recall", "mad_noisy_recall", "mad_fuzzy_recall", "mad_selective_copy",
                           "mad_memorization"}) {
    const std::string task_name = task;
    CAPTURE(task_name);
    const TaskOptions t = small(task);
    const std::string a = generate(t, "a", 7), b = generate(t, "b", 7), c = generate(t, "c", 8);
    for (const char* split : kSplits)
      for (const char* which : {"X", "y"}) {
        const std::string fa = read_file(dataset_file(a, task, split, which));
        CHECK(fa == read_file(dataset_file(b, task, split, which)));
        CHECK(fa != read_file(dataset_file(c, task, split, which)));
      }
    CHECK(read_file(fs::path(a) / "meta.yaml") == read_file(fs::path(b) / "meta.yaml"));
    const CheckResult r = check_dataset(a);
    CHECK(r.ok);
    for (const std::string& line : r.violations) MESSAGE(line);
    const DatasetMeta meta = load_dataset_meta(a);
    CHECK(meta.unscored_targets);
    CHECK(meta.vocab_size == t.vocab_size);
    CHECK(meta.frac_noise == t.frac_noise);
    const std::vector<std::string> shown = show_dataset(a, ShowRequest{});
    REQUIRE(!shown.empty());
    CHECK(has(shown[1], "scored @"));
    for (const std::string& d : {a, b, c}) fs::remove_all(d);
  }
}

TEST_CASE("mad data check: corrupted rows of each task are caught, naming the rule") {
  TaskArgs recall;
  recall.length = 40, recall.noise_vocab_size = 4, recall.frac_noise = "0.3";
  std::string dir = generate(resolve_task("mad_recall", recall), "recall", 3);
  REQUIRE(check_dataset(dir).ok);
  CHECK(has(violation_after(dir, "mad_recall", [](int64_t* x, int64_t*) { x[38] = 11; }),
            "X[38] = 11, the query, is not a key id"));
  CHECK(has(violation_after(dir, "mad_recall", [](int64_t*, int64_t* y) { y[1] = 3; }), "y[1] = 3, expected -1"));
  CHECK(has(violation_after(dir, "mad_recall", [](int64_t* x, int64_t*) { x[0] = 13, x[1] = 2; }),
            "after the noise id X[0]"));
  fs::remove_all(dir);

  TaskArgs copy;
  copy.length = 30, copy.tokens_to_copy = 5;
  dir = generate(resolve_task("mad_selective_copy", copy), "copy", 3);
  REQUIRE(check_dataset(dir).ok);
  CHECK(has(violation_after(dir, "mad_selective_copy", [](int64_t* x, int64_t*) { x[24] = 14; }),
            "X[24] = 14, expected the copy token 15"));
  CHECK(has(violation_after(dir, "mad_selective_copy",
                            [](int64_t* x, int64_t*) { std::swap(*std::find(x, x + 23, int64_t(14)), x[23]); }),
            "the last token is right before the copy token"));
  CHECK(has(violation_after(dir, "mad_selective_copy", [](int64_t*, int64_t* y) { y[29] = y[29] == 0 ? 1 : 0; }),
            "y[29] = "));
  fs::remove_all(dir);

  TaskArgs memo;
  memo.length = 8;
  dir = generate(resolve_task("mad_memorization", memo), "memo", 3);
  REQUIRE(check_dataset(dir).ok);
  CHECK(has(violation_after(dir, "mad_memorization", [](int64_t* x, int64_t*) { x[1] = 3; }),
            "is neither a key (0..126) and the insert token 255"));
  CHECK(has(violation_after(dir, "mad_memorization", [](int64_t*, int64_t* y) { y[1] = y[1] == 200 ? 201 : 200; }),
            "y[1] = "));
  fs::remove_all(dir);

  TaskArgs fuzzy;
  fuzzy.length = 40, fuzzy.k_motif_size = 2, fuzzy.v_motif_size = 2;
  dir = generate(resolve_task("mad_fuzzy_recall", fuzzy), "fuzzy", 3);
  REQUIRE(check_dataset(dir).ok);
  CHECK(has(violation_after(dir, "mad_fuzzy_recall", [](int64_t* x, int64_t*) { x[0] = 3; }), "pad ids"));
  CHECK(has(violation_after(dir, "mad_fuzzy_recall", [](int64_t*, int64_t* y) { y[39] = y[39] == 7 ? 8 : 7; }),
            "y[39] = "));
  fs::remove_all(dir);
}

TEST_CASE("mad options: impossible ones are refused, naming the option and why; compression is refused") {
  auto error = [](const char* task, TaskArgs a) { return error_of([&] { resolve_task(task, a); }); };
  TaskArgs a;
  a.frac_noise = "0.3";
  CHECK(has(error("mad_recall", a), "--frac-noise 0.3 needs noise ids: --noise-vocab-size is 0"));
  a.noise_vocab_size = 4, a.frac_noise = "1";
  CHECK(has(error("mad_recall", a), "--frac-noise '1' must be a number in [0, 1)"));
  CHECK(resolve_task("mad_memorization", a).frac_noise == "1");  // mad-lab allows 1 there
  a = {};
  a.length = 31;
  CHECK(has(error("mad_recall", a), "--length 31 must be even"));
  a = {};
  a.tokens_to_copy = 20, a.length = 41;
  CHECK(has(error("mad_selective_copy", a), "--length 41 must be more than 2 x --tokens-to-copy 20 + 1"));
  a = {};
  a.k_motif_size = 8;
  CHECK(has(error("mad_fuzzy_recall", a), "--k-motif-size 8 is longer than the 7 key ids"));
  a = {};
  a.k_motif_size = 2;
  CHECK(has(error("mad_recall", a), "--k-motif-size is not an option of task mad_recall"));
  a = {};
  a.noise_vocab_size = 16;
  CHECK(has(error("mad_recall", a), "--noise-vocab-size 16 leaves no ids for keys and values"));
  CHECK(has(error("mad_compression", TaskArgs{}), "mad_compression is not offered"));
  CHECK(has(error("mad_compression", TaskArgs{}), "auto_encoder.py"));
  a = {};
  a.frac_noise = "0.20";
  a.noise_vocab_size = 8;
  CHECK(resolve_task("mad_recall", a).frac_noise == "0.2");  // one spelling in meta.yaml
}

TEST_CASE("a tiny model learns mad_memorization and mad_selective_copy far above chance (rmt train, rmt eval)") {
  struct Case {
    const char* task;
    const char* options;
    int steps;
    double above;  // chance: 1/16 of the values, 1/6 of the tokens
  };
  for (const Case& c : {Case{"mad_memorization", "--vocab-size 32 --length 8", 400, 0.9},
                        Case{"mad_selective_copy", "--vocab-size 8 --length 20 --tokens-to-copy 4", 1500, 0.7}}) {
    const std::string task_name = c.task;
    CAPTURE(task_name);
    const std::string dir = fresh_tmp("mad", std::string("learn_") + c.task), run = dir + "_run";
    REQUIRE(rmt_run(fmt::format("generate {} {} --train 4000 --val 100 --test 200 --out {}", c.task, c.options, dir))
                .status == 0);
    write_file_atomic(dir + "/t.yaml",
                      fmt::format("data: {}\nsegments: 1\nmodel: {{kind: baseline, n_layer: 2, n_head: 2, d_head: 16, "
                                  "d_model: 32, d_inner: 64, dropout: 0.0}}\ntrain: {{batch_size: 32, lr: 3.0e-3, "
                                  "schedule: constant, max_steps: {}, eval_every: {}, threads: 1}}\n",
                                  dir, c.steps, c.steps));
    REQUIRE(rmt_run("train --config " + dir + "/t.yaml --out " + run).status == 0);
    const Run ev = rmt_run("eval " + run + " --split test", true);
    REQUIRE(ev.status == 0);
    const double acc = nlohmann::json::parse(ev.output)["acc_teacher_forced"].get<double>();
    MESSAGE(task_name, " ", std::string(c.options), ", baseline 2x32, ", c.steps, " steps: test accuracy ", acc);
    CHECK(acc > c.above);
    fs::remove_all(dir);
    fs::remove_all(run);
  }
}

TEST_CASE("mad --targets next is mad-lab's training targets; --key-motifs longest its fuzzy test instances") {
  for (const char* task : {"mad_recall", "mad_fuzzy_recall"}) {
    const std::string task_name = task;
    CAPTURE(task_name);
    TaskArgs a;
    a.length = 40;
    const TaskOptions scored = resolve_task(task, a);
    CHECK(scored.targets == "scored");
    a.targets = "next";
    const TaskOptions next = resolve_task(task, a);
    const Rows rows = draw(next, 100, 9);
    std::vector<int64_t> want(rows.y[0].size());
    for (size_t s = 0; s < rows.x.size(); ++s) {
      const std::vector<int64_t>& x = rows.x[s];
      const std::vector<int64_t>& y = rows.y[s];
      for (size_t p = 0; p + 1 < x.size(); ++p) CHECK(y[p] == x[p + 1]);  // inputs[1:]
      target_from_x(scored, x.data(), want.data());                      // the evaluation targets
      CHECK(y.back() == want.back());                                    // the query's value last
      CHECK(y.back() >= 0);
      for (size_t p = 0; p + 1 < x.size(); ++p)
        if (want[p] >= 0) CHECK(want[p] == y[p]);  // every scored answer is among the next inputs
    }
  }
  TaskArgs a;
  a.key_motifs = "longest";
  const TaskOptions longest = resolve_task("mad_fuzzy_recall", a);
  const Rows rows = draw(longest, 200, 4);
  for (const std::vector<int64_t>& x : rows.x)
    for (size_t p = 0; p < x.size();) {  // every run of key ids (0..6) is 3 long
      size_t q = p;
      while (q < x.size() && x[q] < 7) ++q;
      if (q > p) CHECK(q - p == 3);
      p = q == p ? p + 1 : q;
    }
  const std::string dir = generate(longest, "longest", 2);
  CHECK(check_dataset(dir).ok);
  CHECK(has(violation_after(dir, "mad_fuzzy_recall", [](int64_t* x, int64_t*) {
              int p = 0;
              while (x[p] >= 7) ++p;  // the first key's first id becomes one more pad: a key of 2
              x[p] = 15;
            }), "is not 3 ids long (key_motifs longest)"));
  fs::remove_all(dir);
  TaskArgs bad;
  bad.targets = "all";
  CHECK(has(error_of([&] { resolve_task("mad_recall", bad); }), "--targets 'all' is not one of scored, next"));
  bad = {};
  bad.key_motifs = "short";
  CHECK(has(error_of([&] { resolve_task("mad_fuzzy_recall", bad); }),
            "--key-motifs 'short' is not one of any, longest"));
  bad = {};
  bad.targets = "next";
  CHECK(has(error_of([&] { resolve_task("mad_selective_copy", bad); }),
            "--targets is not an option of task mad_selective_copy"));
}
