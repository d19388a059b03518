#pragma once
// The segment curriculum and the stopping rule of a training run (docs/paper.md §6).
//
// Curriculum: training grows the number of segments per sample in train.curriculum stages;
// stage i of N (0-based) trains on ceil(segments * (i + 1) / N) segments of the same input, so
// the last stage trains on `segments`. Stage i may run until step ceil((i + 1) * max_steps / N)
// (its share of the steps); how it ends is train.curriculum_advance:
//   fixed    at that step, and validation always uses `segments`;
//   mastery  as soon as validation at the stage's own number of segments meets train.target at
//            train.target_evals consecutive evaluations (or, at the latest, when its share runs
//            out); the steps a stage saves go to the later stages.
// The target streak (and, under mastery, the best checkpoint) carries over from one stage to the
// next when validation stays at the same number of segments: always under the fixed schedule,
// and under mastery between stages on equal segments (1, 2, 2 for 2 segments in 3 stages), which
// are mastered together.
// Stopping rule (train.target > 0): the run ends "solved" once validation at `segments` meets
// train.target at train.target_evals consecutive evaluations; otherwise at max_steps, or, with
// train.stop_unmastered, "unmastered" when a mastery stage's share of the steps runs out.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/run/config.h"

namespace rmt {

// The segments stage `stage` (0-based) trains on.
int curriculum_stage_segments(const Config& config, int stage);
// The first step of stage `stage` under the fixed schedule: ceil(stage * max_steps / N). A
// mastery stage may begin earlier, never later.
int64_t curriculum_stage_start(const Config& config, int stage);
// The number of segments training step `step` (0-based) uses under the fixed schedule.
int curriculum_segments(const Config& config, int64_t step);

// Where a run stands in its curriculum and against its target; saved with the training state.
struct Progression {
  int stage = 0;                          // the curriculum stage being trained
  std::vector<int64_t> stage_first_step;  // the step each reached stage began at (0 for stage 0)
  int streak = 0;                         // consecutive evaluations meeting train.target
  int64_t streak_first_step = -1;         // the step of the streak's first evaluation
  int64_t solved_step = -1;               // that step once the run is solved, else -1
  int64_t unmastered_step = -1;           // train.stop_unmastered: the step the stage's share ran
                                          // out unmastered (the run ends there), else -1

  bool solved() const { return solved_step >= 0; }
  bool unmastered() const { return unmastered_step >= 0; }
  bool ended() const { return solved() || unmastered(); }
};

// A fresh run's progression (stage 0 from step 0).
Progression start_progression();
// The progression of the fixed schedule after `step` steps, without a target streak (what a run
// without train.target resumes with: its state file records only the step).
Progression fixed_progression(const Config& config, int64_t step);
// The segments training step `step` uses; first moves past every stage whose share of the steps
// has run out by `step` (or, with train.stop_unmastered, records that the run ended unmastered
// and stays). Returns true in `advanced` when a stage began.
int progression_segments(const Config& config, Progression& p, int64_t step, bool* advanced = nullptr);
// The segments validation uses: `segments`, or the stage's own under mastery.
int validation_segments(const Config& config, const Progression& p);

enum class ValidationOutcome { none, stage_mastered, solved };
// Records a validation accuracy measured at validation_segments() after `step` steps: the
// target streak, a mastered stage (mastery: the next stage begins at `step`), the solved run.
ValidationOutcome record_validation(const Config& config, Progression& p, int64_t step, double acc);

// "0,1200,3400" <-> {0, 1200, 3400}: the stage starts in state files.
std::string steps_text(const std::vector<int64_t>& steps);
std::vector<int64_t> parse_steps_text(const std::string& text, const std::string& origin);

}  // namespace rmt
