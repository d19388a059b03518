// The BABILong-style tasks (tasks/babilong.h): generation, the answers the facts imply, what
// `rmt data check` finds, and the vocabulary that does not depend on the length.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/babilong.h"
#include "tasks/family.h"
#include "tasks/check.h"
#include "tasks/dataset.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {

std::string babi_tmp(const std::string& name) { return fresh_tmp("rmt_test_babilong", name); }

// A small English text for --noise text: 40 distinct words besides the task's own.
std::string write_noise_text(const std::string& dir) {
  fs::create_directories(dir);
  const std::string path = dir + "/noise.txt";
  std::string text;
  const char* words[] = {"the", "of", "and", "a", "to", "in", "that", "it", "was", "he", "for", "on", "are", "as",
                         "with", "his", "they", "at", "be", "this", "from", "have", "or", "by", "one", "had", "not",
                         "but", "what", "all", "were", "when", "we", "there", "can", "an", "your", "which", "their",
                         "said"};
  for (int i = 0; i < 400; i++) text += std::string(words[(i * 7 + i / 3) % 40]) + (i % 9 ? " " : ". Mary is here!\n");
  rmt::write_file_atomic(path, text);
  return path;
}

rmt::TaskOptions babi_task(const std::string& kind, rmt::TaskArgs a = {}) { return rmt::resolve_task(kind, a); }

void generate(const rmt::TaskOptions& t, const std::string& dir, uint64_t seed, rmt::SplitSizes sizes = {120, 20, 20}) {
  rmt::GenerateRequest r;
  r.task = t;
  r.sizes = sizes;
  r.seed = seed;
  r.out_dir = dir;
  rmt::generate_dataset(r);
}

// Ids of space-separated words under the task's vocabulary.
std::vector<int64_t> ids_of(const rmt::TaskOptions& t, const std::string& text) {
  const std::vector<std::string> vocab = rmt::task_vocab(t);
  std::vector<int64_t> ids;
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    auto it = std::find(vocab.begin(), vocab.end(), w);
    REQUIRE_MESSAGE(it != vocab.end(), w);
    ids.push_back(int64_t(it - vocab.begin()));
  }
  REQUIRE(int(ids.size()) == t.length);
  return ids;
}

std::string answer_of(const rmt::TaskOptions& t, const std::string& text) {
  const std::vector<int64_t> x = ids_of(t, text);
  int64_t y = -1;
  rmt::target_from_x(t, x.data(), &y);
  return rmt::task_vocab(t)[size_t(y)];
}

std::string all_violations(const rmt::CheckResult& c) {
  std::string all;
  for (const std::string& v : c.violations) all += v + "\n";
  return all;
}

}  // namespace

TEST_CASE("BABILong-style: shapes, vocabulary order, the stacked layout of one answer token") {
  const rmt::TaskOptions t = babi_task("reasoning");
  CHECK(rmt::task_len_x(t) == 64);
  CHECK(rmt::task_len_y(t) == 1);
  CHECK(rmt::task_answer_size(t) == 1);
  CHECK(rmt::task_stacked(t));
  const std::vector<std::string> v = rmt::task_vocab(t);
  REQUIRE(v.size() == 33 + 32);
  CHECK(v[0] == ".");
  CHECK(v[1] == "?");
  CHECK(v[2] == "where");
  CHECK(v[3] == "is");
  CHECK(v[4] == "Mary");
  CHECK(v[11] == "Jeff");
  CHECK(v[12] == "went");
  CHECK(v[16] == "got");
  CHECK(v[19] == "kitchen");
  CHECK(v[27] == "apple");
  CHECK(v[32] == "key");
  CHECK(v[33] == "w0");
  CHECK(v[64] == "w31");
  rmt::TaskArgs segments;
  segments.segments = 4, segments.segment_length = 32;
  CHECK(babi_task("memorize", segments).length == 128);
}

TEST_CASE("BABILong-style: the same seed gives the same bytes, another seed others") {
  const std::string text = write_noise_text(babi_tmp("det_text"));
  for (const char* kind : {"memorize", "detect_memorize", "reasoning"})
    for (bool text_noise : {false, true}) {
      CAPTURE(kind);
      CAPTURE(text_noise);
      rmt::TaskArgs a;
      if (text_noise) a.noise = "text", a.noise_text = text, a.noise_words = 20;
      const rmt::TaskOptions t = babi_task(kind, a);
      const std::string d1 = babi_tmp("det1"), d2 = babi_tmp("det2"), d3 = babi_tmp("det3");
      generate(t, d1, 5);
      generate(t, d2, 5);
      generate(t, d3, 6);
      for (const char* split : {"train", "val", "test"})
        for (const char* which : {"X", "y"}) {
          const std::string f1 = rmt::read_file(rmt::dataset_file(d1, kind, split, which));
          CHECK(f1 == rmt::read_file(rmt::dataset_file(d2, kind, split, which)));
          if (std::string(which) == "X") CHECK(f1 != rmt::read_file(rmt::dataset_file(d3, kind, split, which)));
        }
      CHECK(rmt::read_file(fs::path(d1) / "meta.yaml") == rmt::read_file(fs::path(d2) / "meta.yaml"));
    }
}

TEST_CASE("BABILong-style: every drawn sample is valid and its y is the answer") {
  const std::string text = write_noise_text(babi_tmp("draw_text"));
  struct Case { const char* kind; int facts, distractors, length; bool text; };
  for (Case c : {Case{"memorize", 1, 0, 64, false}, Case{"memorize", 1, 7, 40, true},
                 Case{"detect_memorize", 1, 3, 64, false}, Case{"detect_memorize", 1, 7, 40, true},
                 Case{"reasoning", 2, 2, 64, false}, Case{"reasoning", 3, 7, 44, false},
                 Case{"reasoning", 3, 4, 200, true}}) {
    CAPTURE(std::string(c.kind));
    CAPTURE(c.distractors);
    rmt::TaskArgs a;
    a.facts = c.facts, a.distractors = c.distractors, a.length = c.length;
    if (c.text) a.noise = "text", a.noise_text = text;
    if (c.text) a.noise_words = 30;
    const rmt::TaskOptions t = babi_task(c.kind, a);
    rmt::TaskRng rng(17);
    std::vector<int64_t> x(size_t(t.length));
    int64_t y = -1;
    bool take_after_moves = false;
    for (int n = 0; n < 500; n++) {
      rmt::draw_sample(t, rng, x.data(), &y);
      const std::string problem = rmt::babilong_row_problem(t, x.data());
      CHECK_MESSAGE(problem.empty(), problem);
      CHECK(y >= rmt::kBabiFirstPlace);
      CHECK(y < rmt::kBabiFirstPlace + rmt::kBabiPlaces);
      // The noise comes from the noise range only.
      for (int64_t id : x) CHECK(id < int64_t(rmt::task_vocab(t).size()));
      // reasoning: the take comes after the moves in some samples.
      if (std::string(c.kind) == "reasoning") {
        const int64_t object = x[size_t(t.length - 2)];
        int take_at = -1, last_move_of_taker = -1;
        int64_t taker = -1;
        for (int i = 0; i + 3 < t.length - 4; i++)
          if (x[size_t(i) + 2] == object) taker = x[size_t(i)], take_at = i;
        for (int i = 0; i + 3 < t.length - 4; i++)
          if (x[size_t(i)] == taker && x[size_t(i) + 1] < rmt::kBabiFirstTakeVerb &&
              x[size_t(i) + 1] >= rmt::kBabiFirstMoveVerb)
            last_move_of_taker = i;
        take_after_moves = take_after_moves || take_at > last_move_of_taker;
      }
    }
    if (std::string(c.kind) == "reasoning") CHECK(take_after_moves);
  }
}

TEST_CASE("BABILong-style: data check passes on generated datasets of every kind, filler and text noise") {
  const std::string text = write_noise_text(babi_tmp("check_text"));
  for (const char* kind : {"memorize", "detect_memorize", "reasoning"})
    for (bool text_noise : {false, true}) {
      CAPTURE(kind);
      CAPTURE(text_noise);
      rmt::TaskArgs a;
      a.length = 48;
      if (text_noise) a.noise = "text", a.noise_text = text, a.noise_words = 25;
      const std::string dir = babi_tmp(std::string(kind) + (text_noise ? "_text" : "_filler"));
      generate(babi_task(kind, a), dir, 3);
      const rmt::CheckResult c = rmt::check_dataset(dir);
      CHECK_MESSAGE(c.ok, all_violations(c));
      CHECK(c.summary.size() == 3);
      const rmt::DatasetMeta m = rmt::load_dataset_meta(dir);
      CHECK(m.input_length == 48);
      CHECK(m.answer_size == 1);
      CHECK(int(m.vocab.size()) == 33 + (text_noise ? 26 : 32));
      if (text_noise) {
        CHECK(m.vocab.back() == "<unk>");
        CHECK(m.noise_text == "noise.txt");
        CHECK(m.noise_text_sha256 == rmt::sha256_hex(rmt::read_file(text)));
      }
      // The model's view: input = X, target = X[1:] + [answer]; the answer is the last position.
      const rmt::SampleSplit s = rmt::load_sample_split(dir, m, "val");
      CHECK(s.seq_len == 48);
      int64_t n = 0, cols = 0;
      const std::vector<int64_t> y = rmt::read_npy_int_matrix(rmt::dataset_file(dir, kind, "val", "y"), n, cols);
      CHECK(s.target[47] == y[0]);
      CHECK(s.input[47] == rmt::kBabiQuestionMark);
      // data show decodes words.
      const std::vector<std::string> lines = rmt::show_dataset(dir, rmt::ShowRequest{std::string("val"), 2, {}});
      REQUIRE(lines.size() == 3);
      CHECK(lines[1].find("where is") != std::string::npos);
      fs::remove_all(dir);
    }
}

TEST_CASE("BABILong-style: the answer of hand-built rows") {
  rmt::TaskArgs a;
  a.length = 16;
  const rmt::TaskOptions memorize = babi_task("memorize", a);
  CHECK(answer_of(memorize, "Mary went kitchen . w1 w2 w3 w4 w5 w6 w7 w8 where is Mary ?") == "kitchen");
  a.distractors = 1;
  a.length = 20;
  const rmt::TaskOptions memorize2 = babi_task("memorize", a);
  CHECK(answer_of(memorize2, "John moved garden . Mary went kitchen . w1 w2 w3 w4 w5 w6 w7 w8 where is John ?") == "garden");
  const rmt::TaskOptions detect = babi_task("detect_memorize", a);
  CHECK(answer_of(detect, "w1 John moved garden . w2 w3 Mary travelled cellar . w4 w5 w6 w7 w8 where is Mary ?") == "cellar");

  // reasoning, 3 facts: the take after both moves; the object is where its taker went last.
  rmt::TaskArgs r;
  r.facts = 3, r.distractors = 2, r.length = 28;
  const rmt::TaskOptions reasoning = babi_task("reasoning", r);
  const std::string row =
      "Sandra went office . Bill took apple . Sandra journeyed bathroom . Daniel moved hallway . "
      "w0 Sandra grabbed milk . w1 w2 w3 where is milk ?";
  CHECK(answer_of(reasoning, row) == "bathroom");
  CHECK(rmt::babilong_row_problem(reasoning, ids_of(reasoning, row).data()).empty());
  // The take first, then the moves: the last move decides.
  const std::string take_first =
      "Sandra got milk . Sandra went office . Bill took apple . w5 Daniel moved hallway . Sandra moved kitchen . "
      "w0 w1 w2 where is milk ?";
  CHECK(answer_of(reasoning, take_first) == "kitchen");
  CHECK(rmt::babilong_row_problem(reasoning, ids_of(reasoning, take_first).data()).empty());
  // 2 facts: one move, before the take.
  r.facts = 2, r.distractors = 0, r.length = 16;
  const rmt::TaskOptions two = babi_task("reasoning", r);
  CHECK(answer_of(two, "Jeff went balcony . w3 w3 w3 w3 Jeff took key . where is key ?") == "balcony");

  // Rows that break the invariants, each named.
  auto problem = [](const rmt::TaskOptions& t, const std::string& text) {
    return rmt::babilong_row_problem(t, ids_of(t, text).data());
  };
  CHECK(problem(memorize2, "John moved garden . w1 Mary went kitchen . w2 w3 w4 w5 w6 w7 w8 where is John ?")
            .find("memorize has its facts first") != std::string::npos);
  CHECK(problem(memorize2, "John moved garden . w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 where is John ?")
            .find("1 facts, but meta.yaml's options give 2") != std::string::npos);
  CHECK(problem(memorize2, "John moved garden . Mary went apple . w1 w2 w3 w4 w5 w6 w7 w8 where is John ?")
            .find("'apple' after 'Mary went' is not a place") != std::string::npos);
  CHECK(problem(memorize2, "John moved garden . Mary went kitchen w1 w2 w3 w4 w5 w6 w7 w8 w9 where is John ?")
            .find("instead of '.'") != std::string::npos);
  CHECK(problem(memorize2, "John moved garden . Mary went kitchen . w1 kitchen w3 w4 w5 w6 w7 w8 where is John ?")
            .find("X[9] = 'kitchen' is outside a fact") != std::string::npos);
  CHECK(problem(memorize2, "John moved garden . Mary went kitchen . w1 w2 w3 w4 w5 w6 w7 w8 where is Bill ?")
            .find("'Bill' has 0 move") != std::string::npos);
  CHECK(problem(memorize2, "John moved garden . Mary went kitchen . w1 w2 w3 w4 w5 w6 w7 w8 where is apple ?")
            .find("expected 'where is PERSON ?'") != std::string::npos);
  CHECK(problem(two, "Jeff went balcony . w3 w3 w3 w3 Bill took key . where is key ?")
            .find("'Bill' has 0 move and 1 take facts") != std::string::npos);
  CHECK(problem(two, "Jeff went balcony . w3 w3 w3 w3 Bill took key . where is milk ?")
            .find("no fact says who took 'milk'") != std::string::npos);
}

TEST_CASE("BABILong-style: data check finds a corrupted answer, a broken fact, a wrong fact count") {
  rmt::TaskArgs a;
  a.length = 40;
  const std::string dir = babi_tmp("broken");
  generate(babi_task("reasoning", a), dir, 9, {60, 10, 10});
  const std::string x_path = rmt::dataset_file(dir, "reasoning", "train", "X");
  const std::string y_path = rmt::dataset_file(dir, "reasoning", "train", "y");
  int64_t n = 0, cols = 0;
  std::vector<int64_t> X = rmt::read_npy_int_matrix(x_path, n, cols), Y = rmt::read_npy_int_matrix(y_path, n, cols);
  const std::vector<int64_t> X0 = X, Y0 = Y;
  auto check = [&]() {
    rmt::write_npy_int64(x_path, {n, 40}, X.data());
    rmt::write_npy_int64(y_path, {n, 1}, Y.data());
    const std::string all = all_violations(rmt::check_dataset(dir));
    X = X0, Y = Y0;
    return all;
  };
  // The answer: another place.
  Y[4] = Y[4] == rmt::kBabiFirstPlace ? rmt::kBabiFirstPlace + 1 : rmt::kBabiFirstPlace;
  std::string all = check();
  CHECK_MESSAGE(all.find("reasoning_train_X.npy row 4: y[0] = ") != std::string::npos, all);
  CHECK(all.find("but the facts say") != std::string::npos);
  // A fact's "." replaced by a noise word.
  for (int i = 0; i < 36; i++)
    if (X[size_t(3 * 40 + i)] == rmt::kBabiPeriod) {
      X[size_t(3 * 40 + i)] = rmt::kBabiFirstNoise;
      break;
    }
  all = check();
  CHECK_MESSAGE(all.find("reasoning_train_X.npy row 3: X[") != std::string::npos, all);
  CHECK(all.find("instead of '.'") != std::string::npos);
  // A distractor fact turned into noise: 3 facts where meta.yaml says 4.
  int64_t* row = X.data() + 7 * 40;
  const int64_t object = row[38];
  for (int i = 0; i < 36; i++)
    if (row[i] >= rmt::kBabiFirstPerson && row[i] < rmt::kBabiFirstMoveVerb && row[i + 2] != object) {
      bool supporting = false;  // the taker of the object keeps its facts
      for (int k = 0; k < 36; k++) supporting = supporting || (row[k] == row[i] && row[k + 2] == object);
      if (supporting) continue;
      for (int k = 0; k < 4; k++) row[i + k] = rmt::kBabiFirstNoise + 1;
      break;
    }
  all = check();
  CHECK_MESSAGE(all.find("reasoning_train_X.npy row 7: 3 facts, but meta.yaml's options give 4 (2 supporting + 2 "
                         "distractors)") != std::string::npos, all);
  // An id in the fact range where only noise may be: a place on its own.
  X[size_t(9 * 40)] = X[size_t(9 * 40)] >= rmt::kBabiFirstNoise ? rmt::kBabiFirstPlace : X[size_t(9 * 40)];
  if (X[size_t(9 * 40)] == rmt::kBabiFirstPlace) {
    all = check();
    CHECK_MESSAGE(all.find("row 9: X[0] = 'kitchen' is outside a fact") != std::string::npos, all);
  }
  // The intact files pass.
  CHECK(check().empty());
  fs::remove_all(dir);
}

TEST_CASE("BABILong-style: the vocabulary does not depend on the length or the seed") {
  const std::string text = write_noise_text(babi_tmp("vocab_text"));
  for (bool text_noise : {false, true}) {
    rmt::TaskArgs a;
    if (text_noise) a.noise = "text", a.noise_text = text, a.noise_words = 30;
    a.length = 64;
    const std::string short_dir = babi_tmp("len64"), long_dir = babi_tmp("len1024");
    generate(babi_task("detect_memorize", a), short_dir, 1, {30, 5, 5});
    a.length = 1024;
    generate(babi_task("detect_memorize", a), long_dir, 2, {30, 5, 5});
    const rmt::DatasetMeta m64 = rmt::load_dataset_meta(short_dir), m1024 = rmt::load_dataset_meta(long_dir);
    CHECK(m64.vocab == m1024.vocab);
    CHECK(m64.len_x == 64);
    CHECK(m1024.len_x == 1024);
    fs::remove_all(short_dir);
    fs::remove_all(long_dir);
  }
}

TEST_CASE("BABILong-style: max_unique_samples saturates and bounds what can be generated") {
  rmt::TaskArgs a;
  a.length = 8;
  a.noise_words = 1;
  const rmt::TaskOptions tiny = babi_task("memorize", a);  // no noise: 8 people x 4 verbs x 8 places
  CHECK(rmt::max_unique_samples(tiny) == 256);
  CHECK(rmt::generate_unique_x(tiny, 256, 1).size() == 256 * 8);
  CHECK_THROWS_AS(rmt::generate_unique_x(tiny, 257, 1), rmt::Error);
  CHECK(rmt::max_unique_samples(babi_task("reasoning")) == int64_t(1) << 62);
}

TEST_CASE("rmt generate BABILong-style: CLI round trip, --check, show") {
  const std::string dir = babi_tmp("cli");
  Run g = rmt_run("generate detect_memorize --segments 4 --segment-length 16 --distractors 2 --train 50 --val 5 "
                  "--test 5 --out " + dir);
  CHECK_MESSAGE(g.status == 0, g.output);
  CHECK(g.output.find("length 64, 1 + 2 distractor facts, filler noise of 32 words") != std::string::npos);
  Run c = rmt_run("data check " + dir);
  CHECK_MESSAGE(c.status == 0, c.output);
  CHECK(c.output.find("detect_memorize test: OK 5 rows, X [5, 64] y [5, 1]") != std::string::npos);
  Run s = rmt_run("data show " + dir + " -n 2");
  CHECK(s.status == 0);
  CHECK(s.output.find("more noise words") != std::string::npos);
  CHECK(s.output.find("where is") != std::string::npos);
  Run check_only = rmt_run("generate reasoning --check --length 4096 --out " + dir + "/never");
  CHECK_MESSAGE(check_only.status == 0, check_only.output);
  CHECK(!fs::exists(dir + "/never"));
  fs::remove_all(dir);
}
