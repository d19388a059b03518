// sqeq's range options (--max-root, --max-alpha): defaults reproduce the paper's generator byte for
// byte, a smaller range is respected, recorded in meta.yaml and enforced by `rmt data check`.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tasks/family.h"
#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset.h"
#include "tasks/check.h"
#include "tasks/generate.h"
#include "tasks/sqeq.h"
#include "tasks/task_kind.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {
std::string range_tmp(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / "rmt_test_sqeq_range" / name;
  fs::remove_all(dir);
  return dir.string();
}
}  // namespace

TEST_CASE("sqeq defaults: byte-identical to the generator before the range options") {
  std::string dir = range_tmp("golden");
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task("sqeq");
  r.sizes = {300, 50, 80};
  r.seed = 7;
  r.out_dir = dir;
  rmt::generate_dataset(r);
  CHECK(rmt::dataset_fingerprint(dir) == "59dec4f92623b58e084842eeb7615352af0c99022441a6bb9dc6f7fea1112bf2");
}

namespace {
rmt::GenerateRequest sqeq_request(const std::string& dir, int max_root, int max_alpha, rmt::SplitSizes sizes) {
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task("sqeq", {}, {}, {}, max_root, max_alpha);
  r.sizes = sizes;
  r.seed = 3;
  r.out_dir = dir;
  return r;
}

// Every sample's roots, multiplier and no-root coefficients, read back from the text of its blocks.
struct Extremes {
  int64_t min_root = 0, max_root = 0, max_alpha = 0, max_b = 0, max_c = 0, none = 0, rows = 0;
};
Extremes extremes(const std::string& dir) {
  rmt::DatasetMeta meta = rmt::read_dataset_meta(dir);
  Extremes e;
  for (const char* split : rmt::kSplits) {
    int64_t n = 0, cols = 0;
    std::vector<int64_t> X = rmt::read_npy_int_matrix(rmt::dataset_file(dir, "sqeq", split, "X"), n, cols);
    for (int64_t r = 0; r < n; r++) {
      auto block = [&](int j) {
        std::string s;
        for (int k = 0; k < rmt::kSqeqBlock && X[size_t(r * cols + j * rmt::kSqeqBlock + k)] != 0; k++)
          s += meta.vocab[size_t(X[size_t(r * cols + j * rmt::kSqeqBlock + k)])];
        return s;
      };
      const std::string shown = block(0), answer = block(5);
      e.max_alpha = std::max<int64_t>(e.max_alpha, std::abs(std::stoll(shown[0] == '-' && shown[1] == 'x' ? "-1"
                                                                        : shown[0] == 'x' ? "1" : shown)));
      if (answer.empty()) {
        // x^2[+b*x]+c=0: b and c from the canonical block
        const std::string canon = block(1);
        int64_t b = 0, c = 0;
        size_t p = 3;
        if (canon[p] == '+' && canon.find('x', p) != std::string::npos) {
          size_t x = canon.find('x', p);
          b = x == p + 1 ? 1 : std::stoll(canon.substr(p + 1, x - p - 2));
          p = x + 1;
        }
        c = std::stoll(canon.substr(p + 1, canon.size() - 2 - p - 1));
        e.max_b = std::max(e.max_b, b), e.max_c = std::max(e.max_c, c);
        e.none++;
      } else {
        const size_t comma = answer.find(',');
        const int64_t lo = std::stoll(answer.substr(0, comma));
        const int64_t hi = comma == std::string::npos ? lo : std::stoll(answer.substr(comma + 1));
        e.min_root = std::min(e.min_root, lo), e.max_root = std::max(e.max_root, hi);
      }
      e.rows++;
    }
  }
  return e;
}
}  // namespace

TEST_CASE("sqeq --max-root / --max-alpha: every sample in range, recorded in meta.yaml, checked") {
  std::string dir = range_tmp("small");
  rmt::generate_dataset(sqeq_request(dir, 10, 3, {3000, 300, 300}));
  const Extremes e = extremes(dir);
  CHECK(e.rows == 3600);
  CHECK(e.min_root == -9);  // int(uniform(-10, 10)): -9..9 (-10 only when uniform gives exactly -10)
  CHECK(e.max_root == 9);
  CHECK(e.max_alpha == 3);
  CHECK(e.max_b <= 19);     // no-root b in 0..2R-1
  CHECK(e.max_b >= 15);
  CHECK(e.max_c <= 99);     // no-root c up to R^2-1
  CHECK(e.max_c >= 90);
  CHECK(e.none > 0);
  // Drawn (before de-duplication), 20% have no real roots, as in the paper's range.
  rmt::TaskRng rng(5);
  std::vector<int64_t> x(180), y(180);
  int none = 0;
  for (int i = 0; i < 5000; i++) {
    rmt::draw_sample(rmt::resolve_task("sqeq", {}, {}, {}, 10, 3), rng, x.data(), y.data());
    none += x[150] == 0;
  }
  CHECK(none > 5000 * 0.17);
  CHECK(none < 5000 * 0.23);
  const std::string meta = rmt::read_file(fs::path(dir) / "meta.yaml");
  CHECK(meta.find("options: {max_root: 10, max_alpha: 3}") != std::string::npos);
  rmt::DatasetMeta m = rmt::read_dataset_meta(dir);
  CHECK(m.max_root == 10);
  CHECK(m.max_alpha == 3);
  CHECK(rmt::check_dataset(dir).ok);
  CHECK(rmt::load_dataset_meta(dir).max_root == 10);

  // The paper's range is recorded too, and a meta.yaml without the range (written before the
  // options existed) reads as the paper's.
  std::string paper = range_tmp("paper");
  rmt::generate_dataset(sqeq_request(paper, 100, 10, {200, 20, 20}));
  std::string text = rmt::read_file(fs::path(paper) / "meta.yaml");
  const std::string recorded = "options: {max_root: 100, max_alpha: 10}";
  REQUIRE(text.find(recorded) != std::string::npos);
  text.replace(text.find(recorded), recorded.size(), "options: {}");
  rmt::write_file_atomic(fs::path(paper) / "meta.yaml", text);
  CHECK(rmt::read_dataset_meta(paper).max_root == 100);
  CHECK(rmt::read_dataset_meta(paper).max_alpha == 10);
  CHECK(rmt::check_dataset(paper).ok);
  // Without meta.yaml (the authors' layout) too.
  fs::remove(fs::path(paper) / "meta.yaml");
  CHECK(rmt::read_dataset_meta(paper).max_root == 100);
  CHECK(rmt::check_dataset(paper).ok);

  // data check refuses samples outside the range meta.yaml records: roots, multiplier, no-root b, c.
  auto violations_with = [&](const std::string& options) {
    std::string t = rmt::read_file(fs::path(dir) / "meta.yaml");
    const std::string from = "options: {max_root: 10, max_alpha: 3}";
    t.replace(t.find(from), from.size(), options);
    std::string copy = range_tmp("edited");
    fs::create_directories(copy);
    for (const auto& f : fs::directory_iterator(dir)) fs::copy_file(f.path(), fs::path(copy) / f.path().filename());
    rmt::write_file_atomic(fs::path(copy) / "meta.yaml", t);
    rmt::CheckResult r = rmt::check_dataset(copy, 1000);
    CHECK_FALSE(r.ok);
    std::string all;
    for (const auto& v : r.violations) all += v + "\n";
    return all;
  };
  const std::string roots = violations_with("options: {max_root: 5, max_alpha: 3}");
  CHECK(roots.find("is outside -5..4 (meta.yaml options.max_root 5)") != std::string::npos);
  CHECK(roots.find("outside 0..9 (no-root equations' b for meta.yaml options.max_root 5)") != std::string::npos);
  CHECK(roots.find("above 24 (no-root equations' c for meta.yaml options.max_root 5)") != std::string::npos);
  const std::string alpha = violations_with("options: {max_root: 10, max_alpha: 2}");
  CHECK(alpha.find("multiplier 3 is not in ±1..2 (meta.yaml options.max_alpha)") != std::string::npos);
  CHECK(alpha.find("multiplier -3 is not in ±1..2") != std::string::npos);
  CHECK(alpha.find("root") == std::string::npos);
}

TEST_CASE("sqeq range: the block limit (208) and the multiplier limit, computed and refused clearly") {
  // Every sample of R = 208 fits 30-id blocks (roots -208..207, no-root b < 416, c < 208^2);
  // at R = 209 one does not. Enumerated here: the limit in tasks/sqeq.h is not a guess.
  auto longest = [](int R) {
    size_t worst = 0;
    for (int x1 = -R; x1 < R; ++x1)
      for (int x2 = x1; x2 < R; ++x2) {
        rmt::SqeqText t = rmt::sqeq_text_with_roots(x1, x2, 1);
        for (int j = 1; j < rmt::kSqeqBlocks; ++j) worst = std::max(worst, t[j].size());
      }
    for (int b = 0; b < 2 * R; ++b) {
      rmt::SqeqText t = rmt::sqeq_text_no_roots(b, R * R - 1, 1);
      for (int j = 1; j < rmt::kSqeqBlocks; ++j) worst = std::max(worst, t[j].size());
    }
    return worst;
  };
  CHECK(longest(rmt::kSqeqMaxRoot) <= size_t(rmt::kSqeqBlock));
  CHECK(longest(rmt::kSqeqMaxRoot + 1) > size_t(rmt::kSqeqBlock));
  // The multiplier's limit: the shown equation of the double root -R times -A is the longest.
  for (int R : {2, 10, 100, 208}) {
    CAPTURE(R);
    const int A = rmt::sqeq_max_alpha(R);
    size_t worst = 0;
    for (int x1 = -R; x1 < R; ++x1)
      for (int x2 = x1; x2 < R; x2 += (R > 50 ? 7 : 1))
        worst = std::max(worst, rmt::sqeq_text_with_roots(x1, x2, -A)[0].size());
    worst = std::max(worst, rmt::sqeq_text_with_roots(-R, -R, -A)[0].size());
    CHECK(worst <= size_t(rmt::kSqeqBlock));
    CHECK(rmt::sqeq_text_with_roots(-R, -R, -(A + 1))[0].size() > size_t(rmt::kSqeqBlock));
    CHECK(rmt::sqeq_text_no_roots(2 * R - 1, R * R - 1, -A)[0].size() <= size_t(rmt::kSqeqBlock));
  }
  CHECK(rmt::sqeq_max_alpha(100) == 9999);
  auto error = [](int R, int A) { return error_of([&] { rmt::resolve_task("sqeq", {}, {}, {}, R, A); }); };
  CHECK(error(1, 10).find("--max-root must be at least 2 (got 1)") == 0);
  CHECK(error(209, 10).find("--max-root 209 is too large: a sample must fit blocks of 30 ids") == 0);
  CHECK(error(209, 10).find("at most 208") != std::string::npos);
  CHECK(error(100, 0) == "--max-alpha must be at least 1 (got 0): the multiplier is ±round(uniform(1, A))");
  CHECK(error(100, 10000) ==
        "--max-alpha 10000 is too large for --max-root 100: the shown equation "
        "-10000*x^2-2000000*x-100000000=0 needs 32 ids, a block holds 30; at most 9999");
  CHECK(error(100, 2147483647).find("at most 9999") != std::string::npos);
  CHECK(error_of([] { rmt::resolve_task("copy", {}, {}, {}, 10); }) == "--max-root is not an option of task copy");
  CHECK(error_of([] { rmt::resolve_task("retrieval", {}, {}, {}, {}, 3); }) == "--max-alpha is not an option of task retrieval");
  CHECK(rmt::resolve_task("sqeq", {}, {}, {}, 208, 1).max_root == 208);
}

TEST_CASE("sqeq range: the distinct samples are counted exactly; too many requested fails before writing") {
  // R 2, A 1: roots -1..1 -> 6 unordered pairs; no roots: b 0..3, c in b^2/4+1..3 -> 3+3+2+1;
  // times 2 multipliers (±1): 30.
  rmt::TaskOptions tiny = rmt::resolve_task("sqeq", {}, {}, {}, 2, 1);
  CHECK(rmt::max_unique_samples(tiny) == 30);
  std::vector<int64_t> all = rmt::generate_unique_x(tiny, 30, 1);
  CHECK(all.size() == 30u * 180);
  CHECK_THROWS_AS(rmt::generate_unique_x(tiny, 31, 1), rmt::Error);
  // The paper's range keeps its count.
  CHECK(rmt::max_unique_samples(rmt::resolve_task("sqeq")) == 27161000);
  // R 10, A 3 (1140 equations with roots) cannot fill a 20000 / 1000 / 2000 split: refused before
  // anything is written.
  rmt::TaskOptions small = rmt::resolve_task("sqeq", {}, {}, {}, 10, 3);
  CHECK(rmt::max_unique_samples(small) == 9330);
  std::string dir = range_tmp("too_many");
  CHECK(error_of([&] { rmt::generate_dataset(sqeq_request(dir, 10, 3, {20000, 1000, 2000})); }) ==
        "--train 20000 is more than sqeq --max-root 10 --max-alpha 3 has: only 9330 distinct samples");
  CHECK_FALSE(fs::exists(dir));
  // Close to the limit the draws skew towards no-root equations; generate says so.
  rmt::GenerateResult r = rmt::generate_dataset(sqeq_request(dir, 10, 3, {5000, 500, 1000}));
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("have no real roots (the paper's mix: 20%): --max-root 10 --max-alpha 3 has only 1140 "
                        "distinct equations with real roots") != std::string::npos);
  CHECK(rmt::check_dataset(dir).ok);
}
