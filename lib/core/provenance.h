#pragma once
// What made a result: the machine's CPU, and how this rmt was built (type, flags, the vector
// extensions compiled in, the GEMM library). A number is only comparable with another when
// these match (-march=native on another CPU, or another oneDNN, changes the last bits), so
// results.json of every run and `rmt --version` record them, from this one place.
#include <string>
#include <utility>
#include <vector>

namespace rmt {

// The fields, in a fixed order: cpu_model, compiler, build_type, build_flags, native_build,
// vector_extensions, gemm. Values are never empty ("unknown" where not found).
std::vector<std::pair<std::string, std::string>> provenance();

// The CPU's "model name" from /proc/cpuinfo, "unknown" without one.
std::string cpu_model_name();

// Adds provenance() to a JSON object (results.json) as string keys.
template <typename Json>
void add_provenance(Json& object) {
  for (const auto& [key, value] : provenance()) object[key] = value;
}

}  // namespace rmt
