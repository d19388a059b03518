#pragma once
// A trained run read back on its own dataset (rmt eval without --data, rmt attn): the dataset
// must still be the one the run was trained on, or the numbers describe other data without a
// word. A run records its dataset's fingerprint (tasks/dataset.h dataset_fingerprint) in
// results.json and state.safetensors; these compare it with the dataset as it is now.
#include <string>

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

}  // namespace rmt
