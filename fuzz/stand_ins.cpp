// The harnesses fuzz the readers (config, sweep planning, files) and never run a model or read a
// dataset, so they link no backend and no dataset reader: the sweep runner's device check
// (lib/experiments/sweep_run.cpp) is never reached from them, and a sweep's `data: {dir: ...}`
// is refused here as a dataset that cannot be read. These definitions stand in for the real
// ones; a harness that reaches one gets an error, as from an unusable device or dataset.
#include "lib/core/backend.h"
#include "lib/core/error.h"
#include "lib/experiments/sweep_internal.h"

namespace rmt {

Backend& backend_by_name(const std::string& device) {
  fail("device '{}': the fuzz harnesses are built without any backend", device);
}

sweep_internal::SweepData sweep_internal::read_existing_dataset(const std::string& dir, const std::string& where) {
  fail("{}: data.dir {}: the fuzz harnesses read no dataset", where, dir);
}

}  // namespace rmt
