// The config's two families (config_family.h): samples of an algorithmic task, and a language
// model's text.
#include "lib/run/config_family.h"

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/core/model_kind.h"

namespace rmt {

namespace {

class SamplesConfig : public ConfigFamily {
 public:
  FamilyKind kind() const override { return FamilyKind::samples; }
  bool has_key(const std::string& key) const override { return key != "segment_length"; }
  void validate(const Config&) const override {}  // every key's own range is checked by validate
  void check_config_of_data(const Config& config, const std::string& data, const std::string& task) const override {
    if (&config_family(config) != this)
      fail("segment_length {} applies to language models on text datasets (rmt generate text); {} "
           "is task {}, whose samples are cut into `segments`: leave segment_length out",
           config.segment_length, data, task);
  }
  int step_positions(const Config&, int sample_positions) const override { return sample_positions; }
  int step_segments(const Config& config) const override { return config.segments; }
  bool validates_bpc() const override { return false; }
};

class TextConfig : public ConfigFamily {
 public:
  FamilyKind kind() const override { return FamilyKind::text; }
  bool has_key(const std::string& key) const override { return key != "segments"; }

  // Segments of segment_length over B streams: segments, the curriculum and a target belong to
  // samples; bptt must be a number.
  void validate(const Config& config) const override {
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
    if (config.bptt < 0 && ((traits_of(model.kind).has_memory && model.num_mem_tokens > 0) ||
                            traits_of(model.kind).has_mixer_state()))
      fail("invalid config: bptt all with segment_length {}: a language model's streams have no "
           "end to back-propagate to; give the number of earlier segments the memory's gradient "
           "reaches, e.g. bptt: 1 (0 detaches it at every segment)", config.segment_length);
  }

  void check_config_of_data(const Config& config, const std::string& data, const std::string&) const override {
    if (&config_family(config) != this)
      fail("{} is a byte-level text dataset (rmt generate text): set segment_length, the "
           "positions per training segment of each of the train.batch_size streams, e.g. --set "
           "segment_length=128 (`segments` applies to algorithmic tasks)", data);
  }
  int step_positions(const Config& config, int) const override { return config.segment_length; }
  int step_segments(const Config&) const override { return 1; }  // a stream: one segment a step
  bool validates_bpc() const override { return true; }
};

}  // namespace

const ConfigFamily& config_family(FamilyKind kind) {
  static const SamplesConfig samples;
  static const TextConfig text;
  static const ConfigFamily* const families[] = {&samples, &text};  // in FamilyKind's order
  return *families[int(kind)];
}

const ConfigFamily& config_family(const Config& config) {
  return config_family(config.segment_length > 0 ? FamilyKind::text : FamilyKind::samples);
}

}  // namespace rmt
