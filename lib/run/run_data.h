#pragma once
// A trained run read back on its own dataset (rmt eval without --data, rmt attn): the dataset
// must still be the one the run was trained on, or the numbers describe other data without a
// word. A run records its dataset's fingerprint (tasks/dataset.h dataset_fingerprint) in
// results.json and state.safetensors; these compare it with the dataset as it is now.
#include <string>
#include <vector>

#include "lib/files/output_safety.h"

namespace rmt {

// The fingerprint run_dir recorded: results.json's dataset_fingerprint, else the metadata of
// state.safetensors; "" when neither records one (an older rmt, or no checkpoint yet).
std::string recorded_dataset_fingerprint(const std::string& run_dir);

// Checks that the run's own dataset (config.yaml's data) still has the fingerprint the run
// recorded. A changed dataset fails (rmt::Error) naming both fingerprints and the ways out,
// unless allow_changed, which prints a warning on stderr instead; a run that recorded none gets a
// note on stderr. Without a config.yaml or an existing dataset directory it does nothing: the
// command that loads the run names those.
void check_run_dataset_unchanged(const std::string& run_dir, bool allow_changed);

// The files a command that reads the trained run `run_dir` reads, for its outputs to be checked
// against (lib/files/output_safety.h): the checkpoint (best | last | a file, named --checkpoint),
// the run's own files (config.yaml, checkpoints, state, results; --run), the files of the run's
// dataset (config.yaml's data) and those of `data_dir` (--data) where given. What cannot be read
// here is left out: loading the run names it.
std::vector<NamedPath> trained_run_inputs(const std::string& run_dir, const std::string& checkpoint,
                                          const std::string& data_dir = "");

}  // namespace rmt
