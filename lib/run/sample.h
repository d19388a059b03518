#pragma once
// `rmt sample`: text from a trained byte-level language model (docs/paper.md §7). The prompt is
// read as one stream in segments of the run's segment_length from the initial state, the
// Transformer-XL cache and the RMT memory carried from segment to segment as in training and
// evaluation; then each new byte is drawn from the model's next-byte distribution and fed back.
// Inside a segment the new bytes run one row at a time against the segment's cached keys and
// values (Engine::decode_token_row); once a segment is complete it is run whole with its final
// bytes, which hands the cache and memory on to the next one.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/engine.h"
#include "lib/core/random.h"
#include "lib/run/eval_run.h"

namespace rmt {

// The largest --bytes: one megabyte of text is far more than anyone reads from a sample, and it
// bounds the time a typo can cost.
constexpr int64_t kMaxSampleBytes = 1000000;

struct SampleSettings {
  double temperature = 0;  // 0: greedy (the most probable byte, the lowest id on a tie)
  uint64_t seed = 0;       // the random draws of temperature > 0
  int vocab = 0;           // draw only ids below this (0: every id of the model)
};

// The next byte from one row of logits [V]: the argmax at temperature 0, else a draw from
// softmax(logits / temperature) (in double precision) with one rng.uniform().
int32_t sample_from_logits(const float* logits, int V, double temperature, SplitMixRng& rng);

// Continues `prompt` (ids, at least one) by n ids, one stream (batch 1) in segments of T
// positions from the engine's initial state. Evaluation mode (no dropout). Returns the n new
// ids. Fails on an empty prompt, n < 1, T < 1 or a negative or non-finite temperature.
// logits_used, if given, receives the n rows of logits [n, V] the new ids were drawn from.
std::vector<int32_t> sample_continuation(Engine& engine, int T, const std::vector<int32_t>& prompt,
                                         int64_t n, const SampleSettings& settings,
                                         std::vector<float>* logits_used = nullptr);

// `rmt sample RUN --prompt TEXT --bytes N`.
struct SampleRunRequest {
  std::string run_dir;              // written by rmt train on a text dataset
  std::string checkpoint = "best";  // best | last | a .safetensors file
  std::string prompt;               // bytes, as given
  int64_t bytes = 0;                // bytes to generate: 1..kMaxSampleBytes
  SampleSettings settings;
  int threads = 0;                  // CPU threads (0 = all cores), checked as --threads
  std::string device;               // the backend (run_backend); empty: the run's
};
struct SampleRunResult {
  std::string checkpoint;  // the checkpoint file used
  std::string kind;        // model.kind
  int segment_length = 0;  // the run's segment_length
  std::string prompt, continuation;  // bytes
};
// Loads the run's config (it must be a language model: segment_length set) and checkpoint
// (checked against the config, refused when it does not fit in memory), then samples. The
// run's dataset is not needed. Fails (rmt::Error) naming what is wrong.
SampleRunResult sample_run(const SampleRunRequest& request);

}  // namespace rmt
