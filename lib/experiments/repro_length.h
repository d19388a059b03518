#pragma once
// The length items of `rmt reproduce` (lib/experiments/reproduce.cpp): trained runs evaluated on
// datasets of their task at other lengths, in segments of the trained length.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "lib/experiments/sweep.h"

namespace rmt {

// The dataset of the sweep's task (data: options, with --length L) that a length item
// evaluates on: DATA_ROOT/{task}{L}, generated with `rmt generate` unless it exists (its test
// split only is used; train and val get one sample).
std::filesystem::path length_dataset(const std::string& rmt_binary, const std::filesystem::path& data_root,
                                     const std::map<std::string, std::string>& data, int length);

// One trained run evaluated on one length.
struct LengthEval {
  int segments = 0, segment_length = 0;  // evaluated: how many, the longest
  double acc_teacher_forced = 0;
  std::string acc_free_running;          // "" when not decoded
  double seconds = 0;                    // the evaluation's wall time
};

// The test split of `data_dir` evaluated with `run`'s best checkpoint on one thread (the same
// numbers on every machine and re-run). The result is kept in `kept` (written atomically) and
// read back from there on a later call, so an interrupted item resumes where it stopped.
LengthEval evaluate_length(const SweepRun& run, const std::filesystem::path& data_dir,
                           const std::filesystem::path& kept);

// One evaluation a length item needs.
struct LengthEvalJob {
  const SweepRun* run;
  int length;                            // the evaluated input length
  std::filesystem::path data_dir, kept;
};
// Writes the `kept` file of every job that has none yet, `parallel` at a time, each an
// `rmt eval --threads 1` process of `rmt_binary` (one thread, as evaluate_length: the same
// numbers); evaluate_length then reads them back. Fails after all finished if one failed.
void evaluate_lengths(const std::string& rmt_binary, const std::vector<LengthEvalJob>& jobs, int parallel);

}  // namespace rmt
