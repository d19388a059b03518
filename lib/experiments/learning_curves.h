#pragma once
// Learning curves of a sweep's runs: the validation accuracy at every evaluation, from each run's
// metrics.jsonl, kept in a CSV beside the results (so a report can be redrawn without the runs)
// and drawn with gnuplot, one line per run. The reproduction draws the hardest cell of each
// figure (the most segments) and every cell where one of its checks fails, every model and seed
// of it (docs/paper.md §6).
#include <cstdint>
#include <string>
#include <vector>

#include "lib/experiments/results_table.h"  // FigureSize
#include "lib/experiments/sweep.h"

namespace rmt {

struct CurvePoint {
  int64_t step = 0;
  double val_acc = 0;    // teacher-forced validation accuracy (a language model's curve: its bpc)
  int val_segments = 0;  // the segments it was measured at (a mastery curriculum's stage)
};

struct LearningCurve {
  std::string kind;  // model kind
  uint64_t seed = 0;
  int segments = 0;  // of the run's task (its last curriculum stage)
  std::string run_id;
  std::vector<CurvePoint> points;
  bool bpc = false;  // a language model's: validation bits per character, not accuracy
};

// The evaluations in a run's metrics.jsonl (lines without `key` are skipped: training intervals,
// events). Only a torn last line (no '\n': a run killed mid-write) is skipped too; a damaged line
// elsewhere, or a value parse_curves_csv would refuse (an accuracy outside [0, 1], a negative
// step or bpc, val_segments < 1), fails naming the file, line and field. val_segments defaults to
// `segments` where not recorded. key: the metric (val_acc_teacher_forced, or a language model's val_bpc).
std::vector<CurvePoint> read_validation_curve(const std::string& metrics_path, int segments,
                                              const std::string& key = "val_acc_teacher_forced");

// The curves of the plan's finished runs (done or failed: the runs its tables count) that have a
// metrics.jsonl, in the plan's order.
std::vector<LearningCurve> run_curves(const SweepPlan& plan);
// The curves of run directories (RUN_DIR/metrics.jsonl with its config.yaml) and of sweep
// directories (every run directory in it, by name), in the order given: `rmt plot --curves`.
// Runs in progress are drawn as far as they got. Fails naming a directory that holds no run, and
// a language model's run (its validation is bpc, which these curves do not draw).
std::vector<LearningCurve> curves_of_dirs(const std::vector<std::string>& dirs);

// The most segments of any curve (0 for none), and the curves of the runs at `segments`.
int hardest_segments(const std::vector<LearningCurve>& curves);
std::vector<LearningCurve> curves_at(const std::vector<LearningCurve>& curves, int segments);

// Whether some evaluation was measured at fewer segments than its run's task: a mastery
// curriculum validates at its stage's segments, a scheduled one (and a run without one) at all of
// them. What the curves' accuracy is measured at, for the plot's axis and the report:
// "at the stage's segments" or "at all the run's segments".
bool measured_at_stage_segments(const std::vector<LearningCurve>& curves);
std::string measured_at_text(const std::vector<LearningCurve>& curves);

// kind,seed,segments,run_id,step,val_acc,val_segments: one line per evaluation.
std::string curves_csv(const std::vector<LearningCurve>& curves);
// Reads curves_csv's output back; errors name the file and line.
std::vector<LearningCurve> parse_curves_csv(const std::string& text, const std::string& origin);

// A gnuplot script: validation accuracy against step, one line per run (a colour per model
// kind, a dash pattern per seed), into out (.png or .svg).
std::string curves_gnuplot_script(const std::vector<LearningCurve>& curves, const std::string& out,
                                  const std::string& title, const FigureSize& size = {});

}  // namespace rmt
