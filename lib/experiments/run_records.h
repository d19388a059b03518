#pragma once
// Finished runs' records: the small files of a finished run (config.yaml, results.json,
// metrics.jsonl; not its checkpoints) kept beside a reproduce item's committed results, so that a
// reproduction continued on another machine, or after runs/ was removed, skips the runs already
// finished instead of training them again (the committed results then say what it did).
#include <filesystem>

#include "lib/experiments/sweep.h"

namespace rmt {

// The files a record holds, in the order they are written (results.json last: it marks a run
// finished, for the record as for the run directory).
extern const char* const kRunRecordFiles[3];

// Writes the record of every finished run of the plan (results.json in its directory) to
// records_dir/RUN_ID/ where it is missing or differs; each file atomically. Returns how many runs'
// records were written.
int save_run_records(const SweepPlan& plan, const std::filesystem::path& records_dir);

// Copies the record of every planned run whose run directory does not exist and whose record is
// whole (every file present) into that directory, which makes the run finished for the sweep.
// A run directory that exists (finished, in progress or failed) is left as it is. Returns how
// many runs were restored.
int restore_run_records(const SweepPlan& plan, const std::filesystem::path& records_dir);

}  // namespace rmt
