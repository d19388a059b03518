#include "lib/core/provenance.h"

#include <fstream>

#include "lib/core/backend.h"

// Set by CMakeLists.txt on this file only (a build without them says "unknown").
#ifndef RMT_BUILD_TYPE
#define RMT_BUILD_TYPE "unknown"
#endif
#ifndef RMT_BUILD_FLAGS
#define RMT_BUILD_FLAGS "unknown"
#endif

namespace rmt {

namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The vector extensions the compiler was allowed to use in this build (what -march gave it),
// not what the CPU running it has: the code's results depend on the former.
std::string vector_extensions() {
  std::string s;
  auto add = [&s](const char* name) { s += (s.empty() ? "" : " ") + std::string(name); };
#ifdef __AVX512F__
  add("avx512f");
#endif
#ifdef __AVX512BW__
  add("avx512bw");
#endif
#ifdef __AVX512VL__
  add("avx512vl");
#endif
#ifdef __AVX2__
  add("avx2");
#endif
#ifdef __AVX__
  add("avx");
#endif
#ifdef __FMA__
  add("fma");
#endif
#ifdef __F16C__
  add("f16c");
#endif
#ifdef __SSE4_2__
  add("sse4.2");
#endif
#ifdef __SSE2__
  add("sse2");
#endif
#ifdef __ARM_NEON
  add("neon");
#endif
  return s.empty() ? "none" : s;
}

std::string compiler() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "g++ " __VERSION__;
#else
  return "unknown";
#endif
}

}  // namespace

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon != std::string::npos && trim(line.substr(0, colon)) == "model name") {
      const std::string name = trim(line.substr(colon + 1));
      if (!name.empty()) return name;
    }
  }
  return "unknown";
}

std::vector<std::pair<std::string, std::string>> provenance() {
  const std::string flags = RMT_BUILD_FLAGS;
  const bool native = flags.find("-march=native") != std::string::npos;
  return {{"cpu_model", cpu_model_name()},
          {"compiler", compiler()},
          {"build_type", RMT_BUILD_TYPE[0] ? RMT_BUILD_TYPE : "none"},
          {"build_flags", flags.empty() ? "none" : flags},
          {"native_build", native ? "yes (-march=native: built for the CPU that compiled it)" : "no"},
          {"vector_extensions", vector_extensions()},
          {"gemm", cpu_gemm_library()}};
}

}  // namespace rmt
