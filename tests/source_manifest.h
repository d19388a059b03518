#pragma once
// The repository's reproduction manifest: what `rmt bench`'s repro_* models are read from
// (lib/experiments/bench.h), found from any working directory.
#include <string>

inline const std::string kSourceManifest = std::string(RMT_SOURCE_DIR) + "/experiments/reproduce/reproduce.yaml";
