// Backends by name: the one place that knows which backends this build has.
//
// The CUDA backend (built with RMT_CUDA) lives in its own library, librmt_cuda.so, built next to
// the programs and loaded (dlopen) the first time "cuda" is asked for. Linking cuBLAS into rmt
// itself would load it at every start: measured, that made each start of rmt about 130 ms slower
// (6 ms without), and the tests start rmt hundreds of times; commands that do not use the GPU
// should not pay for it.
#include "lib/core/backend.h"
#include "lib/core/error.h"

#ifdef RMT_CUDA
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <mutex>
#endif

namespace rmt {

#ifdef RMT_CUDA
namespace {

// The entry points of librmt_cuda.so (lib/cuda/cuda_backend.cu).
using BackendEntry = Backend* (*)(std::string* error);
using DescriptionEntry = void (*)(std::string* out);

struct CudaLibrary {
  void* handle = nullptr;
  std::string error;  // why it could not be loaded
  BackendEntry backend = nullptr;
  DescriptionEntry description = nullptr;
};

// The directory of the running program ("" if unknown).
std::string program_dir() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return "";
  std::string p(path, size_t(n));
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "" : p.substr(0, slash);
}

// Loaded once, on first use: next to the program (rmt, the test programs), else where the build
// put it (a program copied elsewhere).
const CudaLibrary& cuda_library() {
  static CudaLibrary lib;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& path : {program_dir() + "/" RMT_CUDA_LIBRARY_NAME, std::string(RMT_CUDA_LIBRARY_PATH)}) {
      lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib.handle) break;
      const char* e = dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(e ? e : path);
    }
    if (!lib.handle) {
      lib.error = "cannot load the CUDA backend: " + tried;
      return;
    }
    lib.backend = reinterpret_cast<BackendEntry>(dlsym(lib.handle, "rmt_cuda_backend_v3"));
    lib.description = reinterpret_cast<DescriptionEntry>(dlsym(lib.handle, "rmt_cuda_description_v3"));
    if (!lib.backend || !lib.description)
      lib.error = "the CUDA backend's library lacks its entry points (a stale " RMT_CUDA_LIBRARY_NAME "?)";
  });
  return lib;
}

Backend& cuda_backend() {
  const CudaLibrary& lib = cuda_library();
  if (!lib.error.empty()) fail("device 'cuda': {}", lib.error);
  std::string error;
  Backend* be = lib.backend(&error);
  if (!be) throw Error(error);  // "device 'cuda': no CUDA device found (...)"
  return *be;
}

}  // namespace

std::string cuda_description() {
  const CudaLibrary& lib = cuda_library();
  if (!lib.error.empty()) return lib.error;
  std::string out;
  lib.description(&out);
  return out;
}

#else

std::string cuda_description() { return "no (CPU backend only)"; }

#endif

Backend& backend_by_name(const std::string& device) {
  if (device == "cpu") return cpu_backend();
  if (device == "cpu-guarded") return guarded_cpu_backend();
#ifdef RMT_CUDA
  // Fails with one line when this machine has no usable GPU (lib/cuda/cuda_backend.h).
  if (device == "cuda") return cuda_backend();
#else
  if (device == "cuda")
    fail("device 'cuda': this rmt was built without the CUDA backend (devices here: {})",
         known_devices());
#endif
  fail("unknown device '{}' (devices here: {})", device, known_devices());
}

}  // namespace rmt
