// Kill tests of `rmt train` (tests/kill_harness.h): a tiny run, and a tiny language model with
// carried states, SIGKILLed at every file-write point (inside a write, between its temp file and
// the rename, and just after) and between steps, also while resuming, then resumed with the
// documented command (--resume). The outcome must equal an uninterrupted run's: every file
// bit-identical except the fields that measure time, no metrics line lost or duplicated, no temp
// file left.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/files/io.h"
#include "lib/files/safetensors.h"
#include "tests/cli.h"
#include "tests/kill_harness.h"

namespace {

// A tiny run: 8 steps, a log line every 2, an evaluation and checkpoint every 4 (so kills land
// before the first checkpoint, between checkpoints and inside each checkpoint's three files).
struct TinyTrain {
  fs::path root, config, reference;
  TinyTrain() {
    root = kill_tmp("train");
    const fs::path data = root / "data";
    Run g = rmt_run("generate copy --length 5 --symbols 4 --train 300 --val 40 --test 40 --out " + data.string());
    REQUIRE_MESSAGE(g.status == 0, g.output);
    config = root / "tiny.yaml";
    std::ofstream(config) << "data: " << data.string() << "\n"
                          << "segments: 3\n"
                          << "model: {kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, "
                             "d_inner: 16, dropout: 0.1, num_mem_tokens: 2}\n"
                          << "train: {batch_size: 8, lr: 1.0e-3, max_steps: 8, eval_every: 4, "
                             "log_every: 2, seed: 3, threads: 1}\n";
    reference = root / "uninterrupted";
    Outcome o = train(reference);
    REQUIRE_MESSAGE(o.status == 0, text_of(root / "log"));
  }
  ~TinyTrain() { fs::remove_all(root.parent_path()); }
  Outcome train(const fs::path& out, bool resume = false, const std::string& kill_at = "",
                const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"train", "--config", config.string(), "--out", out.string()};
    if (resume) args.push_back("--resume");
    args.insert(args.end(), extra.begin(), extra.end());
    return run_rmt(args, root / "log", kill_at);
  }
  // Resumes a killed run with the documented command and checks it against the reference.
  void resume_and_check(const fs::path& out, const std::string& context) const {
    fs::remove(root / "log");
    Outcome o = train(out, true);
    CAPTURE(context);
    REQUIRE_MESSAGE(o.status == 0, "rmt train --resume failed: " << text_of(root / "log"));
    CHECK_MESSAGE(temp_files(out).empty(), "temp files left: " << fmt::format("{}", fmt::join(temp_files(out), " ")));
    check_same_run(reference, out, context);
  }
};

const TinyTrain& tiny_train() {
  static TinyTrain t;
  return t;
}

}  // namespace

TEST_CASE("kill: rmt train killed at every write point resumes bit-identical") {
  const TinyTrain& t = tiny_train();
  const fs::path out = t.root / "killed";
  // Point n of a fresh run: 1 inside config.yaml's write, ..., the last just after results.json.
  int points = 0;
  for (int n = 1;; ++n) {
    fs::remove_all(out);
    Outcome o = t.train(out, false, std::to_string(n));
    if (!o.killed) {
      REQUIRE_MESSAGE(o.status == 0, text_of(t.root / "log"));
      break;  // n is past the last write point: the run finished
    }
    ++points;
    t.resume_and_check(out, fmt::format("killed at write point {}", n));
  }
  // config.yaml, 4 log lines, 2 evaluation lines, 2 checkpoints of last/best/state (best only
  // when it improves), results.json: three points each.
  CHECK(points >= 3 * (1 + 4 + 2 + 2 * 2 + 1));
  MESSAGE("rmt train: " << points << " kill points");
}

TEST_CASE("kill: rmt train killed between writes, and killed again while resuming") {
  const TinyTrain& t = tiny_train();
  const fs::path out = t.root / "twice";
  // Between checkpoints: after steps that write nothing or only a log line, before the first
  // checkpoint and after the last (before results.json).
  for (int step : {1, 2, 3, 5, 6, 8}) {
    fs::remove_all(out);
    Outcome o = t.train(out, false, "", {"--abort-after-step", std::to_string(step)});
    REQUIRE(o.status == 86);
    t.resume_and_check(out, fmt::format("died after step {}", step));
  }
  // A resume killed inside its first rewrite of metrics.jsonl (the lines after the checkpoint
  // are dropped), then resumed again.
  for (int m = 1; m <= 3; ++m) {
    fs::remove_all(out);
    REQUIRE(t.train(out, false, "", {"--abort-after-step", "7"}).status == 86);
    REQUIRE(t.train(out, true, fmt::format("{}:metrics.jsonl", m)).killed);
    t.resume_and_check(out, fmt::format("resume killed at metrics.jsonl point {}", m));
  }
  // Pairs of kill points with a fixed seed: the run killed at one, its resume at another.
  Lcg rng{20240};
  int pairs = 0;
  for (int i = 0; i < 8; ++i) {
    const int first = 1 + int(rng.below(42)), second = 1 + int(rng.below(30));
    fs::remove_all(out);
    if (!t.train(out, false, std::to_string(first)).killed) continue;
    t.train(out, true, std::to_string(second));  // killed, or finished if past its last point
    ++pairs;
    t.resume_and_check(out, fmt::format("killed at point {}, its resume at point {}", first, second));
  }
  CHECK(pairs >= 6);
  MESSAGE("rmt train: 6 between-write kills, 3 + " << pairs << " double kills");
}

// ---- rmt train of a language model ------------------------------------------------------------

namespace {

// A tiny language model: xl_rmt with bptt 2 (three carried states, cache and memory), dropout,
// 4 streams of 4 segments per pass, 10 steps: the streams start over at steps 4 and 8, and the
// checkpoints at steps 3, 6, 9 and 10 fall mid-pass, with states stored. A log line every step
// (the loss logged averages the steps since the last line, which a resume cannot restore when a
// checkpoint falls between two lines).
struct TinyLmTrain {
  fs::path root, config, reference;
  TinyLmTrain() {
    root = kill_tmp("lm");
    std::string text;
    uint64_t x = 7;
    for (int i = 0; i < 620; ++i) {  // deterministic letters and spaces
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      text += "abcdefgh ij\n"[(x >> 33) % 12];
    }
    rmt::write_file_atomic(root / "text.txt", text);
    const fs::path data = root / "data";
    Run g = rmt_run("generate text --input " + (root / "text.txt").string() + " --out " + data.string());
    REQUIRE_MESSAGE(g.status == 0, g.output);
    config = root / "lm.yaml";
    // train split 558 bytes: 4 streams of 139, (139 - 1) / 32 = 4 segments per pass
    std::ofstream(config) << "data: " << data.string() << "\n"
                          << "segment_length: 32\nbptt: 2\n"
                          << "model: {kind: xl_rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, "
                             "d_inner: 16, dropout: 0.1, num_mem_tokens: 2, mem_len: 40}\n"
                          << "train: {batch_size: 4, lr: 1.0e-3, max_steps: 10, eval_every: 3, "
                             "log_every: 1, seed: 3, threads: 1}\n";
    reference = root / "uninterrupted";
    Outcome o = train(reference);
    REQUIRE_MESSAGE(o.status == 0, text_of(root / "log"));
  }
  ~TinyLmTrain() { fs::remove_all(root.parent_path()); }
  Outcome train(const fs::path& out, bool resume = false, const std::string& kill_at = "",
                const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"train", "--config", config.string(), "--out", out.string()};
    if (resume) args.push_back("--resume");
    args.insert(args.end(), extra.begin(), extra.end());
    return run_rmt(args, root / "log", kill_at);
  }
  void resume_and_check(const fs::path& out, const std::string& context) const {
    fs::remove(root / "log");
    Outcome o = train(out, true);
    CAPTURE(context);
    REQUIRE_MESSAGE(o.status == 0, "rmt train --resume failed: " << text_of(root / "log"));
    CHECK_MESSAGE(temp_files(out).empty(), "temp files left: " << fmt::format("{}", fmt::join(temp_files(out), " ")));
    check_same_run(reference, out, context);
  }
};

}  // namespace

TEST_CASE("kill: a language model killed at every write point and between steps resumes bit-identical") {
  const TinyLmTrain t;
  // The state file carries the streams' states: at the last checkpoint (step 10) the streams
  // are at segment 2 of their third pass, with the states entering segments 1 and 2 stored.
  rmt::SafetensorsFile state = rmt::load_safetensors((t.reference / "state.safetensors").string());
  CHECK(state.metadata.at("lm.next_segment") == "2");
  CHECK(state.metadata.at("lm.states") == "2");
  CHECK(state.tensors.count("lm.state.1.cache.0") == 1);
  CHECK(state.tensors.count("lm.state.1.mem") == 1);
  const fs::path out = t.root / "killed";
  int points = 0;
  for (int n = 1;; ++n) {
    fs::remove_all(out);
    Outcome o = t.train(out, false, std::to_string(n));
    if (!o.killed) {
      REQUIRE_MESSAGE(o.status == 0, text_of(t.root / "log"));
      break;
    }
    ++points;
    t.resume_and_check(out, fmt::format("killed at write point {}", n));
  }
  // config.yaml, 10 log lines, 4 evaluation lines, 4 checkpoints of last/best/state (best only
  // when it improves), results.json: three points each.
  CHECK(points >= 3 * (1 + 10 + 4 + 4 * 2 + 1));
  for (int step : {1, 3, 4, 5, 7, 8, 10}) {
    fs::remove_all(out);
    REQUIRE(t.train(out, false, "", {"--abort-after-step", std::to_string(step)}).status == 86);
    t.resume_and_check(out, fmt::format("died after step {}", step));
  }
  MESSAGE("rmt train (language model): " << points << " kill points, 7 between-step kills");
}
