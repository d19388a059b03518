// A sweep's dataset that exists (sweep_internal.h read_existing_dataset): what its family says of it.
#include <string>

#include "lib/core/error.h"
#include "lib/experiments/sweep_internal.h"
#include "tasks/family.h"

namespace rmt::sweep_internal {

SweepData read_existing_dataset(const std::string& dir, const std::string& where) {
  SweepData out;
  out.dir = dir;
  try {
    const DatasetFamily& family = dataset_family(dir);
    const DatasetTask task = family.task(dir);
    out.family = family.kind(), out.task = task.task, out.seq_len = task.sample_positions;
  } catch (const Error& e) {
    std::string why = e.what();
    if (why.rfind(dir + ": ", 0) == 0) why = why.substr(dir.size() + 2);  // the directory named once
    fail("{}: data.dir {}: {}", where, dir, why);
  }
  return out;
}

}  // namespace rmt::sweep_internal
