// The config's checks that concern one model kind beyond the kind table's sizes (config.h):
// armt has not run on a GPU yet. Here, apart from config.cpp, so that the config's readers (and
// their fuzzers) need nothing of a run.
#include <optional>
#include <string>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/core/model_kind.h"
#include "lib/run/config.h"

namespace rmt {

// armt's own keys (docs/armt.md): it has not run on a GPU yet. (What it lacks, model.mem_len, and
// model.d_mem of the kinds that lack it, are reset by resolve_kind as every kind's unused sizes
// are: a sweep over several kinds sets them for all.)
void validate_associative_memory_keys(const Config& config) {
  const ModelKindTraits& kt = traits_of(config.model.kind);
  if (kt.has_assoc || kt.has_mixer_state()) check_kind_runs_on(config.model.kind, config.device);
}

void check_kind_runs_on(const std::string& kind, const std::string& device) {
  if (kind_has_assoc(kind) && device == "cuda")
    fail("model.kind armt has not yet run on a GPU (its kernels are built and tested on the host "
         "only; docs/cuda.md): use device cpu");
  if (kind_has_mixer_state(kind) && device == "cuda")
    fail("model.kind {} has not yet run on a GPU (its kernels are built and tested on the host "
         "only; docs/deltanet.md): use device cpu", kind);
}

}  // namespace rmt
