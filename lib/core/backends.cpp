// Backends by name: the one place that knows which backends this build has.
#include "lib/core/backend.h"
#include "lib/core/error.h"

namespace rmt {

std::string known_devices() { return "cpu, cpu-guarded (for tests)"; }

Backend& backend_by_name(const std::string& device) {
  if (device == "cpu") return cpu_backend();
  if (device == "cpu-guarded") return guarded_cpu_backend();
  if (device == "cuda")
    fail("device 'cuda': this rmt was built without the CUDA backend (devices here: {})",
         known_devices());
  fail("unknown device '{}' (devices here: {})", device, known_devices());
}

}  // namespace rmt
