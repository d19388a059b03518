#include <doctest/doctest.h>

#include <filesystem>
#include <algorithm>
#include <set>
#include <string>

#include "tasks/family.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset.h"
#include "tasks/check.h"
#include "tasks/generate.h"
#include "tasks/sqeq.h"
#include "tasks/task_kind.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

static std::string tasks_tmp(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / "rmt_test_tasks" / name;
  fs::remove_all(dir);
  return dir.string();
}

static rmt::GenerateResult small_set(const std::string& task, const std::string& dir, uint64_t seed = 7,
                                     rmt::SplitSizes sizes = {300, 50, 80}) {
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task(task);
  r.sizes = sizes;
  r.seed = seed;
  r.out_dir = dir;
  return rmt::generate_dataset(r);
}

TEST_CASE("the paper's sqeq example formats exactly as docs/paper.md gives it") {
  rmt::SqeqText t = rmt::sqeq_text_with_roots(6, 92, -4);
  CHECK(t[0] == "-4*x^2+392*x-2208=0");
  CHECK(t[1] == "x^2-98*x+552=0");
  CHECK(t[2] == "D=98^2-4*1*552=7396=86^2");
  CHECK(t[3] == "x=(98-86)/2=6");
  CHECK(t[4] == "x=(98+86)/2=92");
  CHECK(t[5] == "6,92");
  // Root order does not matter; the answer is ascending.
  CHECK(rmt::sqeq_text_with_roots(92, 6, -4) == t);
}

TEST_CASE("sqeq monomial rules") {
  CHECK(rmt::sqeq_polynomial(1, 0, 0) == "x^2=0");
  CHECK(rmt::sqeq_polynomial(1, -1, 0) == "x^2-x=0");
  CHECK(rmt::sqeq_polynomial(1, 1, 0) == "x^2+x=0");
  CHECK(rmt::sqeq_polynomial(-1, 2, 1) == "-x^2+2*x+1=0");
  CHECK(rmt::sqeq_polynomial(1, 0, -1) == "x^2-1=0");
  CHECK(rmt::sqeq_polynomial(10, -10, 7) == "10*x^2-10*x+7=0");
  rmt::SqeqText same = rmt::sqeq_text_with_roots(-5, -5, 1);
  CHECK(same[1] == "x^2+10*x+25=0");
  CHECK(same[2] == "D=10^2-4*1*25=0=0^2");
  CHECK(same[5] == "-5");  // distinct roots only
  rmt::SqeqText none = rmt::sqeq_text_no_roots(3, 5, 2);
  CHECK(none[0] == "2*x^2+6*x+10=0");
  CHECK(none[2] == "D=3^2-4*1*5=-11");
  CHECK(none[3].empty());
  CHECK(none[5].empty());
}

TEST_CASE("sqeq encoding: blocks of 30, target shifted left by one") {
  std::vector<int64_t> x(180), y(180);
  rmt::sqeq_encode(rmt::sqeq_text_with_roots(6, 92, -4), x.data(), y.data());
  CHECK(x[0] == 13);   // '-'
  CHECK(x[1] == 6);    // '4'
  CHECK(x[30] == 20);  // 'x' starts block 2
  CHECK(x[150] == 8);  // '6' starts the answer
  CHECK(x[151] == 23); // ','
  CHECK(x[179] == 0);
  for (int i = 0; i < 179; i++) CHECK(y[i] == x[i + 1]);
  CHECK(y[179] == 0);
}

TEST_CASE("every task: generated sets pass the checker, shapes and answer sizes as docs/paper.md") {
  struct Want { const char* task; int len_x, len_y, vocab, answer, input; };
  for (Want w : {Want{"copy", 24, 49, 12, 48, 72}, Want{"reverse", 24, 25, 12, 24, 48},
                 Want{"retrieval", 9, 2, 37, 1, 10}, Want{"sqeq", 180, 180, 24, 150, 180},
                 Want{"copy120", 120, 241, 10, 240, 360}, Want{"copy240", 240, 481, 10, 480, 720},
                 Want{"copy360", 360, 721, 10, 720, 1080}, Want{"reverse120", 120, 121, 10, 120, 240}}) {
    CAPTURE(w.task);
    std::string dir = tasks_tmp(w.task);
    small_set(w.task, dir);
    rmt::CheckResult c = rmt::check_dataset(dir);
    for (auto& v : c.violations) MESSAGE(v);
    CHECK(c.ok);
    CHECK(c.summary.size() == 3);
    rmt::DatasetMeta m = rmt::load_dataset_meta(dir);
    CHECK(m.from_meta_yaml);
    CHECK(m.len_x == w.len_x);
    CHECK(m.len_y == w.len_y);
    CHECK(int(m.vocab.size()) == w.vocab);
    CHECK(m.answer_size == w.answer);
    rmt::SampleSplit s = rmt::load_sample_split(dir, m, "val");
    CHECK(s.n == 50);
    CHECK(s.seq_len == w.input);
    // Without meta.yaml the same meta is inferred from the file names (the authors' layout).
    fs::remove(fs::path(dir) / "meta.yaml");
    rmt::DatasetMeta inferred = rmt::load_dataset_meta(dir);
    CHECK(!inferred.from_meta_yaml);
    CHECK(inferred.kind == m.kind);
    CHECK(inferred.vocab == m.vocab);
    CHECK(inferred.answer_size == m.answer_size);
    CHECK(inferred.stacked == m.stacked);
    CHECK(rmt::check_dataset(dir).ok);
    fs::remove_all(dir);
  }
}

TEST_CASE("sample invariants drawn directly") {
  rmt::TaskRng rng(3);
  rmt::TaskOptions copy = rmt::resolve_task("copy"), rev = rmt::resolve_task("reverse"),
                   ret = rmt::resolve_task("retrieval");
  std::vector<int64_t> x(24), y(49);
  for (int n = 0; n < 200; n++) {
    rmt::draw_sample(copy, rng, x.data(), y.data());
    CHECK(y[0] == 1);
    for (int i = 0; i < 24; i++) {
      CHECK((x[i] >= 2 && x[i] < 12));
      CHECK(y[1 + i] == x[i]);
      CHECK(y[25 + i] == x[i]);
    }
    rmt::draw_sample(rev, rng, x.data(), y.data());
    for (int i = 0; i < 24; i++) CHECK(y[1 + i] == x[23 - i]);
    rmt::draw_sample(ret, rng, x.data(), y.data());
    std::set<int64_t> keys, values;
    for (int k = 0; k < 4; k++) {
      CHECK((x[2 * k] >= 11 && x[2 * k] <= 36));
      CHECK((x[2 * k + 1] >= 0 && x[2 * k + 1] <= 9));
      keys.insert(x[2 * k]);
      values.insert(x[2 * k + 1]);
    }
    CHECK(keys.size() == 4);
    CHECK(values.size() == 4);
    CHECK(keys.count(x[8]) == 1);
    CHECK(y[0] == 10);
    for (int k = 0; k < 4; k++)
      if (x[2 * k] == x[8]) CHECK(y[1] == x[2 * k + 1]);
  }
}

TEST_CASE("sqeq: about 20% of samples have no real roots, all blocks fit") {
  rmt::TaskOptions t = rmt::resolve_task("sqeq");
  rmt::TaskRng rng(11);
  std::vector<int64_t> x(180), y(180);
  int none = 0;
  const int n = 5000;
  for (int i = 0; i < n; i++) {
    rmt::draw_sample(t, rng, x.data(), y.data());
    none += x[150] == 0;  // empty answer block
  }
  CHECK(none > n * 0.17);
  CHECK(none < n * 0.23);
}

TEST_CASE("same seed gives byte-identical files, another seed differs; no X in two splits") {
  std::string a = tasks_tmp("det_a"), b = tasks_tmp("det_b"), c = tasks_tmp("det_c");
  for (const char* task : {"copy", "retrieval", "sqeq"}) {
    CAPTURE(task);
    small_set(task, a, 5);
    small_set(task, b, 5);
    small_set(task, c, 6);
    for (const char* split : {"train", "val", "test"})
      for (const char* which : {"X", "y"}) {
        std::string fa = rmt::read_file(rmt::dataset_file(a, task, split, which));
        CHECK(fa == rmt::read_file(rmt::dataset_file(b, task, split, which)));
        CHECK(fa != rmt::read_file(rmt::dataset_file(c, task, split, which)));
      }
    CHECK(rmt::read_file(fs::path(a) / "meta.yaml") == rmt::read_file(fs::path(b) / "meta.yaml"));
    // No X row twice anywhere.
    std::set<std::vector<int64_t>> rows;
    int64_t total = 0;
    for (const char* split : {"train", "val", "test"}) {
      int64_t n, cols;
      std::vector<int64_t> X = rmt::read_npy_int_matrix(rmt::dataset_file(a, task, split, "X"), n, cols);
      for (int64_t r = 0; r < n; r++) rows.insert(std::vector<int64_t>(X.begin() + r * cols, X.begin() + (r + 1) * cols));
      total += n;
    }
    CHECK(int64_t(rows.size()) == total);
    fs::remove_all(a);
    fs::remove_all(b);
    fs::remove_all(c);
  }
}

TEST_CASE("all distinct samples of a tiny task can be drawn, one more cannot") {
  rmt::TaskOptions t = rmt::resolve_task("copy", 3, 2);
  CHECK(rmt::max_unique_samples(t) == 8);
  std::vector<int64_t> X = rmt::generate_unique_x(t, 8, 1);
  std::set<std::vector<int64_t>> rows;
  for (int r = 0; r < 8; r++) rows.insert(std::vector<int64_t>(X.begin() + r * 3, X.begin() + r * 3 + 3));
  CHECK(rows.size() == 8);
  CHECK_THROWS_AS(rmt::generate_unique_x(t, 9, 1), rmt::Error);
  CHECK(rmt::max_unique_samples(rmt::resolve_task("retrieval")) == 26LL * 25 * 24 * 23 * 10 * 9 * 8 * 7 * 4);
}

TEST_CASE("stacked LM view: input = S[:-1], target = S[1:]") {
  std::string dir = tasks_tmp("lm");
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task("copy", 4, 10);
  r.sizes = {10, 2, 2};
  r.out_dir = dir;
  rmt::generate_dataset(r);
  rmt::DatasetMeta m = rmt::load_dataset_meta(dir);
  rmt::SampleSplit s = rmt::load_sample_split(dir, m, "train");
  int64_t n, cols;
  std::vector<int64_t> X = rmt::read_npy_int_matrix(rmt::dataset_file(dir, "copy", "train", "X"), n, cols);
  CHECK(s.seq_len == 4 + 9 - 1);
  CHECK(s.input[0] == X[0]);
  CHECK(s.input[4] == 1);   // start token follows X
  CHECK(s.target[3] == 1);
  CHECK(s.target[4] == X[0]);
  CHECK(s.target[11] == X[3]);
  CHECK_THROWS_AS(rmt::load_sample_split(dir, m, "nope"), rmt::Error);
  fs::remove_all(dir);
}

TEST_CASE("the checker finds broken rows and cross-split duplicates, naming file and row") {
  std::string dir = tasks_tmp("broken");
  small_set("retrieval", dir);
  fs::remove(fs::path(dir) / "meta.yaml");  // authors' layout: no sha256 to catch the edit first
  int64_t n, cols;
  std::string y_path = rmt::dataset_file(dir, "retrieval", "val", "y");
  std::vector<int64_t> Y = rmt::read_npy_int_matrix(y_path, n, cols);
  Y[2 * 3 + 1] = (Y[2 * 3 + 1] + 1) % 10;  // wrong answer in row 3
  rmt::write_npy_int64(y_path, {n, cols}, Y.data());
  rmt::CheckResult c = rmt::check_dataset(dir);
  CHECK(!c.ok);
  REQUIRE(!c.violations.empty());
  CHECK(c.violations[0].find("retrieval_val_X.npy row 3") != std::string::npos);

  // Copy a train row into test: an X in two splits.
  small_set("copy", dir = tasks_tmp("dup"));
  std::vector<int64_t> train = rmt::read_npy_int_matrix(rmt::dataset_file(dir, "copy", "train", "X"), n, cols);
  std::string tx = rmt::dataset_file(dir, "copy", "test", "X");
  std::vector<int64_t> test = rmt::read_npy_int_matrix(tx, n, cols);
  std::copy(train.begin(), train.begin() + cols, test.begin());
  rmt::write_npy_int64(tx, {n, cols}, test.data());
  c = rmt::check_dataset(dir);
  CHECK(!c.ok);
  bool sha = false, dup = false;
  for (auto& v : c.violations) {
    sha = sha || v.find("sha256") != std::string::npos;
    dup = dup || v.find("same X as copy_train_X.npy row 0") != std::string::npos;
  }
  CHECK(sha);
  CHECK(dup);
  fs::remove_all(dir);
}

TEST_CASE("dataset fingerprint: same data same value, with or without meta.yaml; any change differs") {
  std::string a = tasks_tmp("fp_a"), b = tasks_tmp("fp_b");
  small_set("copy", a, 5, {40, 10, 10});
  small_set("copy", b, 5, {40, 10, 10});
  const std::string fa = rmt::dataset_fingerprint(a);
  CHECK(fa.size() == 64);
  CHECK(fa == rmt::dataset_fingerprint(b));
  // The authors' layout (no meta.yaml) of the same files has the same fingerprint.
  fs::remove(fs::path(b) / "meta.yaml");
  CHECK(rmt::dataset_fingerprint(b) == fa);
  // Regenerated with another seed: differs.
  fs::remove_all(b);
  small_set("copy", b, 6, {40, 10, 10});
  CHECK(rmt::dataset_fingerprint(b) != fa);
  // One byte of one file changed: differs.
  std::string path = rmt::dataset_file(a, "copy", "test", "y");
  std::string bytes = rmt::read_file(path);
  bytes.back() ^= 1;
  rmt::write_file_atomic(path, bytes);
  CHECK(rmt::dataset_fingerprint(a) != fa);
  // A missing file is an error naming it.
  fs::remove(path);
  CHECK(error_of([&] { rmt::dataset_fingerprint(a); }).find("copy_test_y.npy: missing") != std::string::npos);
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_CASE("meta.yaml contradictions: every one a violation naming key, value and implied value; load refuses") {
  std::string dir = tasks_tmp("contradict");
  small_set("reverse", dir, 3, {30, 5, 5});
  const std::string meta_path = (fs::path(dir) / "meta.yaml").string();
  const std::string good = rmt::read_file(meta_path);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    REQUIRE(text.find(from) != std::string::npos);
    text.replace(text.find(from), from.size(), to);
    rmt::write_file_atomic(meta_path, text);
  };
  // Several at once: each is listed.
  std::string text = good;
  for (auto [from, to] : {std::pair{"answer_size: 24", "answer_size: 48"}, std::pair{"len_y: 25", "len_y: 49"},
                          std::pair{"train: 30", "train: 31"}, std::pair{"stacked: true", "stacked: false"}})
    text.replace(text.find(from), std::string(from).size(), to);
  rmt::write_file_atomic(meta_path, text);
  rmt::CheckResult c = rmt::check_dataset(dir);
  CHECK(!c.ok);
  std::string all;
  for (auto& v : c.violations) all += v + "\n";
  CAPTURE(all);
  CHECK(all.find("meta.yaml: answer_size is 48, but task reverse implies 24") != std::string::npos);
  CHECK(all.find("meta.yaml: len_y is 49, but task reverse implies 25") != std::string::npos);
  CHECK(all.find("meta.yaml: stacked is false, but task reverse implies true") != std::string::npos);
  CHECK(all.find("meta.yaml: counts.train is 31, but reverse_train_X.npy has 30 rows") != std::string::npos);
  // The loader refuses with the message `rmt data check` gives, and fails before reading rows.
  const std::string refused = error_of([&] { rmt::load_dataset_meta(dir); });
  CHECK(refused == rmt::invalid_dataset_message(dir, c.violations));
  // read_dataset_meta gives the values as written; implied values only after the check.
  CHECK(rmt::read_dataset_meta(dir).answer_size == 48);
  with("answer_size: 24", "answer_size: 24");
  CHECK(rmt::check_dataset(dir).ok);
  CHECK(rmt::load_dataset_meta(dir).answer_size == 24);
  // Structure errors are thrown (one line, naming file and key).
  with("len_x: 24", "len_x: [24]");
  CHECK(error_of([&] { rmt::check_dataset(dir); }) == meta_path + ": 'len_x' must be an integer, got a list");
  with("counts: {train: 30, val: 5, test: 5}", "counts: {train: 30, val: 5, test: 5, extra: 1}");
  CHECK(error_of([&] { rmt::load_dataset_meta(dir); }).find("unknown key 'counts.extra'") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("readers check shapes and dtype before reading an element: float32, [N, 0], overflowing shapes") {
  std::string dir = tasks_tmp("shapes");
  small_set("copy", dir, 3, {30, 5, 5});
  fs::remove(fs::path(dir) / "meta.yaml");
  const std::string y_path = rmt::dataset_file(dir, "copy", "train", "y");
  const std::string x_path = rmt::dataset_file(dir, "copy", "val", "X");
  const std::string y_good = rmt::read_file(y_path), x_good = rmt::read_file(x_path);
  rmt::DatasetMeta meta = rmt::load_dataset_meta(dir);
  std::vector<int64_t> none;
  rmt::write_npy_int64(y_path, {30, 0}, none.data());
  CHECK(error_of([&] { rmt::load_sample_split(dir, meta, "train"); }).find("copy_train_y.npy: shape is [30, 0], but task copy implies [N, 49]") != std::string::npos);
  CHECK(!rmt::check_dataset(dir).ok);
  CHECK_THROWS_AS(rmt::show_samples(dir, "train", 3), rmt::Error);
  rmt::write_file_atomic(y_path, y_good);
  std::vector<float> f(5 * 24, 2.0f);
  rmt::write_npy_float32(x_path, {5, 24}, f.data());
  CHECK(error_of([&] { rmt::load_sample_split(dir, meta, "val"); }).find("copy_val_X.npy: dtype is float32") != std::string::npos);
  CHECK_THROWS_AS(rmt::show_samples(dir, "val", 3), rmt::Error);
  rmt::write_file_atomic(x_path, x_good);
  CHECK(rmt::check_dataset(dir).ok);
  rmt::SampleSplit s = rmt::load_sample_split(dir, meta, "val");
  CHECK(s.max_id >= 2);
  CHECK(s.max_id < 12);
  fs::remove_all(dir);
}

TEST_CASE("generate: every split needs rows; seeds up to 2^64-1 round-trip through meta.yaml") {
  std::string dir = tasks_tmp("gen_sizes");
  for (rmt::SplitSizes s : {rmt::SplitSizes{0, 5, 5}, rmt::SplitSizes{5, 0, 5}, rmt::SplitSizes{5, 5, 0}}) {
    CHECK(error_of([&] { small_set("copy", dir, 1, s); }).find("must be at least 1") != std::string::npos);
    CHECK(!fs::exists(dir));
  }
  small_set("copy", dir, UINT64_MAX, {5, 2, 2});
  CHECK(rmt::load_dataset_meta(dir).seed == UINT64_MAX);
  fs::remove_all(dir);
}

TEST_CASE("task table: every kind's record is whole, and its draws pass its own checks") {
  using namespace rmt;
  for (const TaskKindTraits& k : task_kinds()) {
    CAPTURE(k.name);
    // The functions every kind must have; the hooks may be absent. A kind its dataset's meta.yaml
    // defines (imported) has no sampling, target or options to resolve, and no preset.
    CHECK(bool(k.len_x));
    CHECK(bool(k.len_y));
    CHECK(bool(k.vocab));
    CHECK(bool(k.row_problem));
    CHECK(bool(k.show_row));
    CHECK(find_task_kind(k.name) == &k);
    const bool generated = !k.defined_by_meta;
    CHECK(bool(k.max_unique) == generated);
    CHECK(bool(k.draw) == generated);
    CHECK(bool(k.target) == generated);
    CHECK(bool(k.resolve_options) == generated);
    CHECK(is_task_name(k.name) == generated);  // each generated kind is also a base task of its name
  }
  CHECK(find_task_kind("sort") == nullptr);
  CHECK_THROWS_WITH_AS(task_kind("sort"), doctest::Contains("unknown task kind 'sort'"), Error);
  for (const std::string& name : task_names()) {
    CAPTURE(name);
    const TaskOptions t = resolve_task(name);
    const TaskKindTraits& k = task_kind(t.kind);
    DatasetMeta meta;
    meta.vocab = task_vocab(t);
    meta.len_x = task_len_x(t);
    meta.len_y = task_len_y(t);
    meta.from_meta_yaml = true;
    TaskRng rng(11);
    std::vector<int64_t> x(size_t(meta.len_x)), y(size_t(meta.len_y)), want(size_t(meta.len_y));
    for (int i = 0; i < 20; i++) {
      draw_sample(t, rng, x.data(), y.data());
      for (int64_t id : x) REQUIRE((id >= 0 && id < int64_t(meta.vocab.size())));
      CHECK(k.row_problem(t, meta, x.data(), y.data()) == "");
      target_from_x(t, x.data(), want.data());
      CHECK(want == y);
    }
    // A row the kind must refuse: X starts with ids 0, 0 (a pad, a digit where a key belongs, "." before
    // a fact, a symbol where ar_*'s SEP belongs). (Ids outside the vocabulary are refused before the
    // kind's checks run.)
    x[0] = x[1] = 0;
    CHECK(k.row_problem(t, meta, x.data(), y.data()) != "");
  }
}

TEST_CASE("ar_remember, ar_rewrite: one key-value block a segment; rewrite answers the last value") {
  using namespace rmt;
  TaskArgs args;
  args.pairs = 6, args.key_size = 2, args.value_size = 3, args.symbols = 5;
  for (const char* name : {"ar_remember", "ar_rewrite"}) {
    CAPTURE(name);
    const TaskOptions t = resolve_task(name, args);
    const int block = 2 + 1 + 3 + 1;  // key SEP value EOS
    CHECK(task_len_x(t) == 6 * block + 2 + 1);
    CHECK(task_len_y(t) == 3 + 1);
    CHECK(task_answer_size(t) == 4);  // the value and EOS
    // The model's input, X then y less its last id, cut into pairs + 1 segments: one block each.
    const int input = task_len_x(t) + task_len_y(t) - 1;
    const std::vector<int> lengths = segment_lengths(input, 6 + 1);
    for (int s = 0; s < 6; ++s) CHECK(lengths[size_t(s)] == block);
    CHECK(lengths.back() == block - 1);
    CHECK(task_vocab(t) == std::vector<std::string>{"0", "1", "2", "3", "4", "=", "?", "."});
  }
  // rewrite: a key seen twice answers with its later value.
  const TaskOptions rw = resolve_task("ar_rewrite", args);
  TaskRng rng(5);
  int repeated = 0;
  std::vector<int64_t> x(size_t(task_len_x(rw))), y(size_t(task_len_y(rw)));
  for (int n = 0; n < 300; ++n) {
    draw_sample(rw, rng, x.data(), y.data());
    const int64_t* query = x.data() + 6 * 7;
    int last = -1, seen = 0;
    for (int p = 0; p < 6; ++p)
      if (std::equal(query, query + 2, x.data() + p * 7)) last = p, ++seen;
    REQUIRE(last >= 0);
    repeated += seen > 1;
    for (int j = 0; j < 3; ++j) CHECK(y[size_t(j)] == x[size_t(last * 7 + 3 + j)]);
    CHECK(y[3] == 5 + 2);  // EOS
  }
  CHECK(repeated > 10);  // 25 keys, 6 pairs: repeats are common
  // remember: distinct keys, and too many pairs for the keys is refused.
  const TaskOptions rm = resolve_task("ar_remember", args);
  for (int n = 0; n < 300; ++n) {
    draw_sample(rm, rng, x.data(), y.data());
    std::set<std::vector<int64_t>> keys;
    for (int p = 0; p < 6; ++p) keys.insert({x[size_t(p * 7)], x[size_t(p * 7 + 1)]});
    CHECK(keys.size() == 6);
  }
  TaskArgs many;
  many.pairs = 17;
  CHECK_THROWS_WITH_AS(resolve_task("ar_remember", many),
                       doctest::Contains("--pairs 17 is too many for distinct keys: 16 symbols in keys of 1 make 16"),
                       Error);
  CHECK_NOTHROW(resolve_task("ar_rewrite", many));
  TaskArgs key;
  key.key_size = 2;
  CHECK_THROWS_WITH_AS(resolve_task("retrieval", key), doctest::Contains("--key-size is not an option of task retrieval"),
                       Error);
}
