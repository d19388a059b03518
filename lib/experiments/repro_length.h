#pragma once
// The length items of `rmt reproduce`: trained runs evaluated on datasets of their task at other
// lengths, in segments of the trained length. Generation and evaluation run in this process
// (tasks/ generate_dataset, lib/run evaluate_run), as `rmt generate` and `rmt eval` would.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "lib/experiments/sweep.h"

namespace rmt {

// The dataset of the sweep's task (data: options, with length L) that a length item evaluates
// on: DATA_ROOT/{task}{L}, generated unless it exists (its test split only is used; train and val
// get one sample). An existing one generated with other options is an error (generated_data.h).
std::filesystem::path length_dataset(const std::filesystem::path& data_root,
                                     const std::map<std::string, std::string>& data, int length);

// One trained run evaluated on one length.
struct LengthEval {
  int segments = 0, segment_length = 0;  // evaluated: how many, the longest
  double acc_teacher_forced = 0;
  std::string acc_free_running;          // "" when not decoded
  double seconds = 0;                    // the evaluation's wall time
  // Samples whose outputs were not finite numbers on this data (a memory that overflows far past
  // the trained length), scored as wrong answers, of `samples` evaluated; the item lists them.
  int64_t non_finite_samples = 0, samples = 0;
  // What computed it (as a training run's results.json says): "unknown" in one kept by an older rmt.
  std::string git_commit = "unknown", device = "unknown", cpu_model = "unknown", vector_extensions = "unknown",
              build = "unknown";
};

// One evaluation a length item needs.
struct LengthEvalJob {
  const SweepRun* run;
  int length;                            // the evaluated input length
  std::filesystem::path data_dir, kept;
  int segment_length = 0;                // evaluated segments' length; 0: the trained longest segment
};

// Each job's evaluation: the test split of its data_dir with its run's best checkpoint, on one
// CPU thread (the same numbers on every machine and re-run). A job whose `kept` file exists is
// read back from it; the others are evaluated, `parallel` at a time, and kept (written
// atomically), so an interrupted item resumes where it stopped. Samples whose outputs are not
// finite count as wrong answers (LengthEval::non_finite_samples); fails, after all finished, if
// an evaluation failed.
std::vector<LengthEval> evaluate_lengths(const std::vector<LengthEvalJob>& jobs, int parallel);

}  // namespace rmt
