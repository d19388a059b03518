// The config's checks that concern one family of runs (lib/run/run_family.h) or one model kind:
// a language model's own keys, armt's, and a config against its dataset's family. Here, not in
// the family classes, so that the config's readers (and their fuzzers) need nothing of a run.
#include <optional>
#include <string>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/core/model_kind.h"
#include "lib/run/config.h"

namespace rmt {

// Segments of segment_length over B streams: segments, the curriculum and a target belong to
// samples; bptt must be a number.
void validate_language_model_keys(const Config& config) {
  const ModelConfig& model = config.model;
  if (config.segments != Config().segments)
    fail("invalid config: segments {} and segment_length {} are both set: segments cuts an "
         "algorithmic task's samples, segment_length a text's streams; give one",
         config.segments, config.segment_length);
  if (config.train.curriculum != 1)
    fail("invalid config: train.curriculum {} applies to algorithmic tasks (it grows the number "
         "of segments per sample); a language model (segment_length {}) has none to grow",
         config.train.curriculum, config.segment_length);
  if (config.train.target > 0)
    fail("invalid config: train.target {} is a validation accuracy to stop at; a language model "
         "(segment_length {}) reports bpc: leave train.target out", config.train.target,
         config.segment_length);
  if (traits_of(model.kind).has_assoc)
    fail("invalid config: model.kind armt on a text dataset (segment_length {}) is not supported yet: "
         "its associative memory is not carried between training steps; train it on an algorithmic "
         "task (docs/armt.md)", config.segment_length);
  if (config.bptt < 0 && traits_of(model.kind).has_memory && model.num_mem_tokens > 0)
    fail("invalid config: bptt all with segment_length {}: a language model's streams have no "
         "end to back-propagate to; give the number of earlier segments the memory's gradient "
         "reaches, e.g. bptt: 1 (0 detaches it at every segment)", config.segment_length);
}

// armt's own keys (docs/armt.md): it has not run on a GPU yet. (What it lacks, model.mem_len, and
// model.d_mem of the kinds that lack it, are reset by resolve_kind as every kind's unused sizes
// are: a sweep over several kinds sets them for all.)
void validate_associative_memory_keys(const Config& config) {
  if (traits_of(config.model.kind).has_assoc) check_kind_runs_on(config.model.kind, config.device);
}

void check_kind_runs_on(const std::string& kind, const std::string& device) {
  const std::optional<ModelKind> k = find_model_kind(kind);
  if (k && traits_of(*k).has_assoc && device == "cuda")
    fail("model.kind armt has not yet run on a GPU (its kernels are built and tested on the host "
         "only; docs/cuda.md): use device cpu");
}

void check_config_fits_data(const Config& config, bool text, const std::string& data, const std::string& task) {
  if (text && !is_lm(config))
    fail("{} is a byte-level text dataset (rmt generate text): set segment_length, the "
         "positions per training segment of each of the train.batch_size streams, e.g. --set "
         "segment_length=128 (`segments` applies to algorithmic tasks)", data);
  if (!text && is_lm(config))
    fail("segment_length {} applies to language models on text datasets (rmt generate text); {} "
         "is task {}, whose samples are cut into `segments`: leave segment_length out",
         config.segment_length, data, task);
}

}  // namespace rmt
