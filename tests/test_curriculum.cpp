// The segment curriculum (fixed and mastery) and the stopping rule (train.target), as functions
// and as `rmt train` runs them: stage boundaries, streaks, what results.json records, resume.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/files/io.h"
#include "lib/run/curriculum.h"
#include "lib/run/train.h"
#include "tests/cli.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

rmt::Config staged(int segments, int64_t max_steps, int stages) {
  rmt::Config c;
  c.segments = segments;
  c.train.max_steps = max_steps;
  c.train.curriculum = stages;
  return c;
}

// A tiny copy run (3 segments, a 1-layer model) with a curriculum of 3 stages (1, 2, 3 segments).
struct TinyStaged {
  std::string root, config;
  TinyStaged() {
    root = fresh_tmp("rmt_test_curriculum", "root");
    fs::create_directories(root);
    Run g = rmt_run("generate copy --length 5 --symbols 4 --train 300 --val 40 --test 40 --out " + root + "/data");
    REQUIRE_MESSAGE(g.status == 0, g.output);
    config = root + "/tiny.yaml";
    std::ofstream(config) << "data: " << root << "/data\nsegments: 3\n"
                          << "model: {kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, "
                             "d_inner: 16, num_mem_tokens: 2}\n"
                          << "train: {batch_size: 8, lr: 1.0e-3, max_steps: 200, eval_every: 10, "
                             "log_every: 5, seed: 3, threads: 1, curriculum: 3}\n";
  }
  Run train(const std::string& out, const std::string& extra) const {
    return rmt_run("train --config " + config + " --out " + root + "/" + out + " " + extra);
  }
  std::string file(const std::string& run, const std::string& name) const {
    return rmt::read_file(root + "/" + run + "/" + name);
  }
  std::vector<json> metrics(const std::string& run) const {
    std::vector<json> lines;
    std::istringstream in(file(run, "metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      json j = json::parse(line);
      j.erase("tokens_per_s");
      lines.push_back(j);
    }
    return lines;
  }
};

const TinyStaged& tiny_staged() {
  static TinyStaged t;
  return t;
}

}  // namespace

TEST_CASE("curriculum stages: segments, and the fixed schedule's first steps") {
  // 40000 steps in 3 stages: the printed stages and the trained ones agree (they did not when
  // max_steps was not a multiple of the stages: "3, 3, 6" was printed for 3, 6, 9).
  rmt::Config c = staged(9, 40000, 3);
  CHECK(rmt::curriculum_stage_segments(c, 0) == 3);
  CHECK(rmt::curriculum_stage_segments(c, 1) == 6);
  CHECK(rmt::curriculum_stage_segments(c, 2) == 9);
  CHECK(rmt::curriculum_stage_start(c, 1) == 13334);
  CHECK(rmt::curriculum_stage_start(c, 2) == 26667);
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t first = rmt::curriculum_stage_start(c, stage);
    CHECK(rmt::curriculum_segments(c, first) == rmt::curriculum_stage_segments(c, stage));
    if (first > 0) CHECK(rmt::curriculum_segments(c, first - 1) == rmt::curriculum_stage_segments(c, stage - 1));
  }
  // Under the fixed schedule the progression trains exactly what curriculum_segments says.
  for (const rmt::Config& k : {staged(9, 40000, 3), staged(2, 31, 3), staged(7, 100, 4), staged(5, 7, 1)}) {
    rmt::Progression p = rmt::start_progression();
    bool agrees = true;
    for (int64_t step = 0; step < k.train.max_steps; ++step)
      agrees = agrees && rmt::progression_segments(k, p, step) == rmt::curriculum_segments(k, step);
    CHECK(agrees);
    CHECK(int(p.stage_first_step.size()) == k.train.curriculum);
  }
}

TEST_CASE("the stopping rule and the mastery curriculum, as functions") {
  using rmt::ValidationOutcome;
  rmt::Config c = staged(9, 1000, 3);
  rmt::Progression p = rmt::start_progression();
  // No target: nothing is ever solved.
  CHECK(rmt::record_validation(c, p, 10, 1.0) == ValidationOutcome::none);
  CHECK(!p.solved());

  // Fixed schedule with a target: validation is at all 9 segments; a streak broken by one
  // evaluation below the target starts again.
  c.train.target = 0.9;
  c.train.target_evals = 2;
  CHECK(rmt::validation_segments(c, p) == 9);
  CHECK(rmt::record_validation(c, p, 100, 0.95) == ValidationOutcome::none);
  CHECK(rmt::record_validation(c, p, 200, 0.85) == ValidationOutcome::none);
  CHECK(rmt::record_validation(c, p, 300, 0.90) == ValidationOutcome::none);
  CHECK(rmt::record_validation(c, p, 400, 0.99) == ValidationOutcome::solved);
  CHECK(p.solved_step == 300);  // the streak's first evaluation

  // Mastery: a stage that meets the target moves on at once; the streak restarts at the new
  // number of segments; a share that runs out moves on too; the last stage's streak solves.
  c.train.curriculum_advance = "mastery";
  p = rmt::start_progression();
  CHECK(rmt::validation_segments(c, p) == 3);
  CHECK(rmt::record_validation(c, p, 50, 0.95) == ValidationOutcome::none);
  CHECK(rmt::record_validation(c, p, 100, 0.95) == ValidationOutcome::stage_mastered);
  CHECK(p.stage == 1);
  CHECK(p.stage_first_step == std::vector<int64_t>{0, 100});
  CHECK(rmt::validation_segments(c, p) == 6);
  CHECK(rmt::record_validation(c, p, 150, 0.95) == ValidationOutcome::none);  // 1 of 2 at 6 segments
  bool advanced = false;
  CHECK(rmt::progression_segments(c, p, 666, &advanced) == 6);
  CHECK(!advanced);
  CHECK(rmt::progression_segments(c, p, 667, &advanced) == 9);  // the share of stage 2 ends at 667
  CHECK(advanced);
  CHECK(p.stage_first_step == std::vector<int64_t>{0, 100, 667});
  CHECK(p.streak == 0);
  CHECK(rmt::record_validation(c, p, 700, 0.99) == ValidationOutcome::none);
  CHECK(rmt::record_validation(c, p, 750, 0.99) == ValidationOutcome::solved);
  CHECK(p.solved_step == 700);

  CHECK(rmt::parse_steps_text(rmt::steps_text({0, 100, 667}), "t") == std::vector<int64_t>{0, 100, 667});
  for (const char* bad : {"", "1,2", "0,5,3", "0,x", "0,-1", "0,,2"})
    CHECK_THROWS_AS(rmt::parse_steps_text(bad, "t"), rmt::Error);
}

TEST_CASE("stages on as many segments as the last carry the target streak over, and are mastered together") {
  using rmt::ValidationOutcome;
  // 1 segment in 3 stages (1, 1, 1): the share of stage 1 running out does not break a streak.
  rmt::Config one = staged(1, 300, 3);
  one.train.target = 0.9;
  one.train.target_evals = 2;
  one.train.curriculum_advance = "mastery";
  rmt::Progression p = rmt::start_progression();
  CHECK(rmt::record_validation(one, p, 90, 0.95) == ValidationOutcome::none);
  bool advanced = false;
  CHECK(rmt::progression_segments(one, p, 100, &advanced) == 1);
  CHECK(advanced);
  CHECK(p.streak == 1);
  CHECK(rmt::record_validation(one, p, 110, 0.95) == ValidationOutcome::solved);
  CHECK(p.solved_step == 90);

  // The fixed schedule validates at all segments throughout: its streak survives every stage.
  rmt::Config fixed = staged(9, 300, 3);
  fixed.train.target = 0.9;
  p = rmt::start_progression();
  CHECK(rmt::record_validation(fixed, p, 90, 0.95) == ValidationOutcome::none);
  CHECK(rmt::progression_segments(fixed, p, 100) == 6);
  CHECK(rmt::record_validation(fixed, p, 110, 0.95) == ValidationOutcome::solved);
  CHECK(p.solved_step == 90);

  // 3 segments in 5 stages (1, 2, 2, 3, 3): mastering stage 2 masters stage 3 with it, and the
  // streak starts anew at 3 segments.
  rmt::Config five = staged(3, 1000, 5);
  five.train.target = 0.9;
  five.train.curriculum_advance = "mastery";
  p = rmt::start_progression();
  CHECK(rmt::record_validation(five, p, 10, 0.95) == ValidationOutcome::none);
  CHECK(rmt::record_validation(five, p, 20, 0.95) == ValidationOutcome::stage_mastered);
  CHECK(rmt::validation_segments(five, p) == 2);
  CHECK(rmt::record_validation(five, p, 30, 0.95) == ValidationOutcome::none);
  CHECK(rmt::record_validation(five, p, 40, 0.95) == ValidationOutcome::stage_mastered);
  CHECK(p.stage == 3);
  CHECK(p.stage_first_step == std::vector<int64_t>{0, 20, 40, 40});
  CHECK(p.streak == 0);
  CHECK(rmt::validation_segments(five, p) == 3);
}

TEST_CASE("the memory estimate covers every curriculum stage, also when max_steps is not a multiple of them") {
  const TinyStaged& t = tiny_staged();
  rmt::Config c = rmt::load_config(t.config);
  c.train.max_steps = 40000;
  const rmt::RunSetup run = rmt::prepare_run(c);
  double largest = 0;
  for (int stage = 0; stage < 3; ++stage) {
    rmt::Workload w = run.family->train_workload(run);
    w.seg_len = rmt::segment_lengths(run.seq_len, rmt::curriculum_stage_segments(c, stage));
    largest = std::max(largest, rmt::estimate_memory(run.config.model, w).total());
  }
  CHECK(run.family->train_memory_estimate(run).total() == largest);
  rmt::Workload last = run.family->train_workload(run);  // all 3 segments: the last stage
  CHECK(run.family->train_memory_estimate(run).total() >= rmt::estimate_memory(run.config.model, last).total());
}

TEST_CASE("rmt train stops when solved and records why, with the stages' first steps") {
  const TinyStaged& t = tiny_staged();
  // A target any model meets: each stage is mastered at its second evaluation.
  Run r = t.train("mastered", "--set train.curriculum_advance=mastery --set train.target=0.01");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("curriculum: 1, 2, 3 segments (a stage ends once mastered") != std::string::npos);
  CHECK(r.output.find("curriculum stage 2 of 3: 2 segments from step 20 (mastered)") != std::string::npos);
  CHECK(r.output.find("solved: validation accuracy >= 0.01 at 2 evaluations in a row from step 50") != std::string::npos);
  json res = json::parse(t.file("mastered", "results.json"));
  CHECK(res["end_reason"] == "solved");
  CHECK(res["solved_step"] == 50);
  CHECK(res["steps"] == 60);
  CHECK(res["segments"] == 3);  // tested at the run's own segments
  CHECK(res["best_step"].get<int>() >= 50);  // the best is from the last stage's evaluations
  CHECK(res["curriculum"] == json::parse(R"([{"segments": 1, "first_step": 0},
      {"segments": 2, "first_step": 20}, {"segments": 3, "first_step": 40}])"));
  std::vector<int> val_segments;
  for (const json& j : t.metrics("mastered"))
    if (j.contains("val_segments")) val_segments.push_back(j["val_segments"]);
  CHECK(val_segments == std::vector<int>{1, 1, 2, 2, 3, 3});

  // Killed in the second stage and resumed: the same files, the same metrics lines, once each.
  Run killed = t.train("mastered_resumed", "--set train.curriculum_advance=mastery --set train.target=0.01 "
                                           "--abort-after-step 35");
  CHECK(killed.status == 86);
  Run resumed = t.train("mastered_resumed", "--set train.curriculum_advance=mastery --set train.target=0.01 --resume");
  REQUIRE_MESSAGE(resumed.status == 0, resumed.output);
  CHECK(t.file("mastered", "last.safetensors") == t.file("mastered_resumed", "last.safetensors"));
  CHECK(t.file("mastered", "best.safetensors") == t.file("mastered_resumed", "best.safetensors"));
  CHECK(t.metrics("mastered") == t.metrics("mastered_resumed"));

  // A target no run of 30 steps meets: every stage ends when its share runs out, and the run at
  // its ceiling, which results.json says.
  Run ceiling = t.train("ceiling", "--set train.curriculum_advance=mastery --set train.target=1 "
                                   "--set train.max_steps=30");
  REQUIRE_MESSAGE(ceiling.status == 0, ceiling.output);
  CHECK(ceiling.output.find("from step 10 (its share of the steps ran out)") != std::string::npos);
  res = json::parse(t.file("ceiling", "results.json"));
  CHECK(res["end_reason"] == "max_steps");
  CHECK(res["solved_step"].is_null());
  CHECK(res["steps"] == 30);
  CHECK(res["curriculum"] == json::parse(R"([{"segments": 1, "first_step": 0},
      {"segments": 2, "first_step": 10}, {"segments": 3, "first_step": 20}])"));

  // The fixed schedule with a target: validation at all 3 segments from the start.
  Run fixed = t.train("fixed", "--set train.target=0.01 --set train.target_evals=3");
  REQUIRE_MESSAGE(fixed.status == 0, fixed.output);
  res = json::parse(t.file("fixed", "results.json"));
  CHECK(res["end_reason"] == "solved");
  CHECK(res["solved_step"] == 10);
  CHECK(res["steps"] == 30);
}

TEST_CASE("rmt train keeps the best checkpoint across stages on the same segments") {
  // A 1-segment baseline in 3 mastery stages (1, 1, 1) with a high learning rate, so validation
  // loss goes up and down: the best is the lowest loss of the whole run, not of the last stage.
  const TinyStaged& t = tiny_staged();
  const std::string config = t.root + "/one_segment.yaml";
  std::ofstream(config) << "data: " << t.root << "/data\nsegments: 1\n"
                        << "model: {kind: baseline, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, d_inner: 16}\n"
                        << "train: {batch_size: 8, lr: 5.0e-2, max_steps: 30, eval_every: 5, log_every: 5, "
                           "seed: 1, threads: 1, curriculum: 3, curriculum_advance: mastery, target: 1}\n";
  Run r = rmt_run("train --config " + config + " --out " + t.root + "/one_segment");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  double lowest = INFINITY;
  int64_t lowest_step = -1;
  int stage_lines = 0;
  for (const json& j : t.metrics("one_segment")) {
    if (j.contains("stage")) ++stage_lines;
    if (!j.contains("val_loss")) continue;
    const bool lower = j["val_loss"].get<double>() < lowest;
    CHECK(j["best"] == lower);  // "best" is against every evaluation before it
    if (lower) lowest = j["val_loss"], lowest_step = j["step"];
  }
  CHECK(stage_lines == 2);
  CHECK(json::parse(t.file("one_segment", "results.json"))["best_step"] == lowest_step);
}

TEST_CASE("the curriculum printed by rmt train is the one trained when max_steps is not a multiple of the stages") {
  const TinyStaged& t = tiny_staged();
  Run r = t.train("printed", "--set train.max_steps=40");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("curriculum: 1, 2, 3 segments (equal shares of the steps)") != std::string::npos);
  json res = json::parse(t.file("printed", "results.json"));
  CHECK(res["end_reason"] == "max_steps");
  CHECK(!res.contains("solved_step"));
  CHECK(res["curriculum"] == json::parse(R"([{"segments": 1, "first_step": 0},
      {"segments": 2, "first_step": 14}, {"segments": 3, "first_step": 27}])"));
}

TEST_CASE("fixed_progression: where the fixed schedule stands after a number of steps") {
  const rmt::Config c = staged(9, 30, 3);
  CHECK(rmt::fixed_progression(c, 0).stage_first_step == std::vector<int64_t>{0});
  CHECK(rmt::fixed_progression(c, 9).stage == 0);
  CHECK(rmt::fixed_progression(c, 10).stage_first_step == std::vector<int64_t>{0, 10});
  CHECK(rmt::fixed_progression(c, 29).stage_first_step == std::vector<int64_t>{0, 10, 20});
  CHECK(rmt::fixed_progression(c, 29).stage == 2);
}

TEST_CASE("train.stop_unmastered: a stage whose share runs out unmastered ends the run") {
  using rmt::ValidationOutcome;
  rmt::Config c = staged(9, 900, 3);
  c.train.target = 0.9;
  c.train.curriculum_advance = "mastery";
  c.train.stop_unmastered = true;
  rmt::Progression p = rmt::start_progression();
  CHECK(rmt::record_validation(c, p, 100, 0.95) == ValidationOutcome::none);
  CHECK(rmt::record_validation(c, p, 200, 0.95) == ValidationOutcome::stage_mastered);  // stage 1 mastered
  bool advanced = true;
  CHECK(rmt::progression_segments(c, p, 599, &advanced) == 6);
  CHECK(!p.ended());
  CHECK(rmt::progression_segments(c, p, 600, &advanced) == 6);  // stage 2's share ends at 600
  CHECK(!advanced);
  CHECK(p.stage == 1);
  CHECK(p.unmastered_step == 600);
  CHECK(p.ended());
  CHECK(!p.solved());
  // The evaluation at that step is the run's last: it masters nothing.
  CHECK(rmt::record_validation(c, p, 600, 0.95) == ValidationOutcome::none);
  CHECK(rmt::record_validation(c, p, 600, 0.95) == ValidationOutcome::none);
  CHECK(p.stage == 1);
  CHECK(rmt::progression_segments(c, p, 700) == 6);
  CHECK(p.unmastered_step == 600);

  // The key needs the mastery curriculum, and is written only when set (run ids stay as they were).
  CHECK_NOTHROW(rmt::validate(c));
  CHECK(rmt::to_yaml(c).find("  stop_unmastered: true\n") != std::string::npos);
  CHECK(rmt::parse_config(rmt::to_yaml(c), "t").train.stop_unmastered);
  CHECK(rmt::to_yaml(rmt::Config()).find("stop_unmastered") == std::string::npos);
  c.train.curriculum_advance = "fixed";
  CHECK_THROWS_WITH(rmt::validate(c), doctest::Contains("train.stop_unmastered needs train.curriculum_advance mastery"));
}

TEST_CASE("rmt train ends an unmastered run, says why, and a killed one resumes to the same end") {
  const TinyStaged& t = tiny_staged();
  // A target no run of 20 steps meets: the first stage's share runs out unmastered.
  const std::string keys = "--set train.curriculum_advance=mastery --set train.target=1 "
                           "--set train.stop_unmastered=true --set train.max_steps=60 ";
  Run r = t.train("unmastered", keys);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("stage 1 of 3 (1 segments) was not mastered in its share of the steps: the run ends "
                      "at step 20 (train.stop_unmastered)") != std::string::npos);
  json res = json::parse(t.file("unmastered", "results.json"));
  CHECK(res["end_reason"] == "unmastered");
  CHECK(res["solved_step"].is_null());
  CHECK(res["steps"] == 20);
  CHECK(res["segments"] == 3);  // tested at the run's own segments all the same
  CHECK(res["curriculum"] == json::parse(R"([{"segments": 1, "first_step": 0}])"));

  Run killed = t.train("unmastered_resumed", keys + "--abort-after-step 15");
  CHECK(killed.status == 86);
  Run resumed = t.train("unmastered_resumed", keys + "--resume");
  REQUIRE_MESSAGE(resumed.status == 0, resumed.output);
  CHECK(t.file("unmastered", "last.safetensors") == t.file("unmastered_resumed", "last.safetensors"));
  CHECK(t.metrics("unmastered") == t.metrics("unmastered_resumed"));
  // Resuming the ended run trains nothing more.
  Run again = t.train("unmastered_resumed", keys + "--resume");
  REQUIRE_MESSAGE(again.status == 0, again.output);
  CHECK(json::parse(t.file("unmastered_resumed", "results.json"))["steps"] == 20);
}
