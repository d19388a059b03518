#pragma once
// A sweep's eval: block (sweep.h SweepEvalSpec): once its runs are done, every finished run is
// evaluated on its task at other lengths, as `rmt eval --data DIR --split test --threads 1
// --count-non-finite` would (in constant memory: one segment and the state entering it), and
// the results go to RUNS/NAME/length_results.csv, one row per run and evaluated dataset, in the
// layout `rmt table`, `rmt plot` and `--heatmap` read (the reproduction's length items write the
// same, from the same evaluate_lengths).
//
//   multiples: [k, ...]  the sweep's data generated again with length k x data.length (its
//                        test split; train and val one sample each), under RUNS/NAME/eval_data
//   data: [DIR, ...]     datasets that exist, of the runs' task (checked as rmt eval checks)
//   segment_length: N    segments of N positions (default: each run's trained longest segment)
//
// Each evaluation is kept in RUNS/NAME/evals/RUN_ID/LABEL.json (atomically) before the next
// starts, so a killed sweep resumes where it stopped and never evaluates one twice.
#include <string>
#include <vector>

#include "lib/experiments/sweep.h"

namespace rmt {

// Evaluations the block asks for of the plan's finished runs that are not kept yet.
size_t pending_evaluations(const SweepPlan& plan);
// Generates the datasets it needs, evaluates what is not kept, `jobs` at a time, and writes
// length_results.csv (atomically); a plan without an eval: block does nothing. Runs that are
// not done are left out (and their evaluations with them). Fails, after the others finished,
// naming each evaluation that failed.
void run_sweep_evaluations(const SweepPlan& plan, int jobs, bool quiet);
// length_results.csv from the evaluations kept so far (rmt sweep --collect), without
// evaluating; returns how many the block asks for that are not kept.
size_t write_length_results(const SweepPlan& plan);

}  // namespace rmt
