#include "lib/run/curriculum.h"

#include <algorithm>
#include <sstream>

#include "lib/core/error.h"

namespace rmt {

int curriculum_stage_segments(const Config& config, int stage) {
  const int64_t stages = config.train.curriculum;
  return int((int64_t(config.segments) * (stage + 1) + stages - 1) / stages);
}

int64_t curriculum_stage_start(const Config& config, int stage) {
  const int64_t stages = config.train.curriculum;
  return (int64_t(stage) * config.train.max_steps + stages - 1) / stages;
}

int curriculum_segments(const Config& config, int64_t step) {
  const int64_t stages = config.train.curriculum;
  const int64_t stage = std::min(stages - 1, step * stages / config.train.max_steps);
  return curriculum_stage_segments(config, int(stage));
}

Progression start_progression() {
  Progression p;
  p.stage_first_step = {0};
  return p;
}

Progression fixed_progression(const Config& config, int64_t step) {
  Progression p = start_progression();
  while (p.stage + 1 < config.train.curriculum && curriculum_stage_start(config, p.stage + 1) <= step)
    p.stage_first_step.push_back(curriculum_stage_start(config, ++p.stage));
  return p;
}

namespace {

void begin_stage(const Config& config, Progression& p, int stage, int64_t step) {
  // A streak counts evaluations at one number of segments: it goes on while validation stays at
  // the same segments (always under the fixed schedule; from stage 1 to 1 of a 1-segment run).
  const int validated_before = validation_segments(config, p);
  p.stage = stage;
  p.stage_first_step.resize(size_t(stage), step);  // a stage skipped over begins at `step` too
  p.stage_first_step.push_back(step);
  if (validation_segments(config, p) != validated_before) {
    p.streak = 0;
    p.streak_first_step = -1;
  }
}

}  // namespace

int progression_segments(const Config& config, Progression& p, int64_t step, bool* advanced) {
  const int last = config.train.curriculum - 1;
  int stage = p.stage;
  while (stage < last && step >= curriculum_stage_start(config, stage + 1)) ++stage;
  if (stage != p.stage && config.train.stop_unmastered) {
    if (!p.ended()) p.unmastered_step = step;
    stage = p.stage;
  }
  if (advanced) *advanced = stage != p.stage;
  if (stage != p.stage) begin_stage(config, p, stage, step);
  return curriculum_stage_segments(config, p.stage);
}

int validation_segments(const Config& config, const Progression& p) {
  return config.train.curriculum_advance == "mastery" ? curriculum_stage_segments(config, p.stage)
                                                      : config.segments;
}

ValidationOutcome record_validation(const Config& config, Progression& p, int64_t step, double acc) {
  const TrainConfig& tc = config.train;
  if (tc.target <= 0 || p.ended()) return ValidationOutcome::none;  // ended: the last evaluation
  if (acc >= tc.target) {
    if (p.streak++ == 0) p.streak_first_step = step;
  } else {
    p.streak = 0;
    p.streak_first_step = -1;
  }
  if (p.streak < tc.target_evals) return ValidationOutcome::none;
  if (validation_segments(config, p) == config.segments) {
    p.solved_step = p.streak_first_step;
    return ValidationOutcome::solved;
  }
  // mastery (fixed validates at `segments`): the next stage with more segments begins with the
  // next step; the stages with as many as the mastered one are mastered with it.
  int next = p.stage + 1;
  while (curriculum_stage_segments(config, next) == curriculum_stage_segments(config, p.stage)) ++next;
  begin_stage(config, p, next, step);
  return ValidationOutcome::stage_mastered;
}

std::string steps_text(const std::vector<int64_t>& steps) {
  std::string out;
  for (size_t i = 0; i < steps.size(); ++i) out += (i ? "," : "") + std::to_string(steps[i]);
  return out;
}

std::vector<int64_t> parse_steps_text(const std::string& text, const std::string& origin) {
  std::vector<int64_t> steps;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    int64_t v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (used != item.size() || v < 0 || (!steps.empty() && v < steps.back()))
      fail("{}: '{}' is not a list of ascending steps", origin, text);
    steps.push_back(v);
  }
  if (steps.empty() || steps[0] != 0) fail("{}: '{}' is not a list of stage starts from step 0", origin, text);
  return steps;
}

}  // namespace rmt
