// The device names this build accepts, apart from backends.cpp because the config reader needs
// them too: it names them in its errors, and the fuzz harnesses link the reader without any backend.
#include "lib/core/backend.h"

namespace rmt {

std::string known_devices() {
#ifdef RMT_CUDA
  return "cpu, cpu-guarded (for tests), cuda";
#else
  return "cpu, cpu-guarded (for tests)";
#endif
}

}  // namespace rmt
