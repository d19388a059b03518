#include "lib/run/sample.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "lib/core/backend.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/run/checkpoint.h"
#include "lib/run/config.h"
#include "lib/run/run_family.h"
#include "lib/run/train.h"
#include "lib/run/run_directory.h"
#include "tasks/text.h"

namespace fs = std::filesystem;

namespace rmt {

int32_t sample_from_logits(const float* logits, int V, double temperature, SplitMixRng& rng) {
  const int argmax = int(std::max_element(logits, logits + V) - logits);
  if (temperature == 0) return argmax;
  // softmax(l / t) relative to the largest logit: every weight in (0, 1], the largest 1.
  std::vector<double> w(static_cast<size_t>(V));
  double total = 0;
  for (int i = 0; i < V; ++i) total += w[size_t(i)] = std::exp((double(logits[i]) - logits[argmax]) / temperature);
  const double u = rng.uniform() * total;
  double acc = 0;
  for (int i = 0; i < V; ++i) {
    acc += w[size_t(i)];
    if (u < acc) return i;
  }
  return argmax;  // u rounded up to the total: the draw falls in the last weight's share
}

std::vector<int32_t> sample_continuation(Engine& engine, int T, const std::vector<int32_t>& prompt,
                                         int64_t n, const SampleSettings& settings,
                                         std::vector<float>* logits_used) {
  if (prompt.empty())
    fail("the prompt is empty: the model predicts each byte from the bytes before it and has no "
         "start-of-text symbol; give at least one byte");
  if (n < 1) fail("the number of bytes to generate must be at least 1 (got {})", n);
  if (T < 1) fail("the segment length must be at least 1 (got {})", T);
  if (!std::isfinite(settings.temperature) || settings.temperature < 0)
    fail("the temperature must be a finite number >= 0 (0: greedy), got {}", settings.temperature);
  // Positions 0 .. P + n - 2 are inputs (the last new byte is never fed back); the logits at
  // position i give byte i + 1, so the first new byte comes from the prompt's last position.
  const int64_t P = int64_t(prompt.size());
  const int64_t last_input = P + n - 2;
  std::vector<int32_t> seq(prompt);
  seq.reserve(size_t(P + n));
  SplitMixRng rng(mix_seed(settings.seed, 0x5A4D));
  RecurrentState state, next;
  engine.initial_state(state, 1);
  SegmentActivations a;
  std::vector<int32_t> tokens(static_cast<size_t>(T));
  const SegmentOutputs everything{};
  std::vector<float> row;
  for (int64_t s0 = 0; s0 <= last_input; s0 += T) {
    // The segment's inputs as far as they are known; the rest are placeholders, which no
    // earlier row sees (token rows attend only to earlier ones) and each decoded row replaces.
    const int64_t known = std::min<int64_t>(int64_t(seq.size()) - s0, T);
    for (int t = 0; t < T; ++t) tokens[size_t(t)] = t < known ? seq[size_t(s0 + t)] : 0;
    engine.forward_segment(a, tokens.data(), nullptr, 1, T, state, next, false, 0, 1.f, everything);
    const std::vector<float> seg_logits = engine.segment_logits(a);  // [1, T, V]
    const int V = int(seg_logits.size()) / T;
    const int draw_from = settings.vocab > 0 ? std::min(settings.vocab, V) : V;
    bool decoded = false;
    for (int t = 0; t < T && s0 + t <= last_input; ++t) {
      const int64_t i = s0 + t;
      if (i < P - 1) continue;  // inside the prompt: its next byte is known
      const float* logits = seg_logits.data() + int64_t(t) * V;
      if (i > P - 1) {  // a generated input: run its row against the segment's keys and values
        row.resize(size_t(V));
        const int32_t id = seq[size_t(i)];
        tokens[size_t(t)] = id;
        engine.decode_token_row(a, t, &id, row.data());
        logits = row.data();
        decoded = true;
      }
      if (logits_used) logits_used->insert(logits_used->end(), logits, logits + V);
      seq.push_back(sample_from_logits(logits, draw_from, settings.temperature, rng));
    }
    if (s0 + T > last_input) break;  // the last segment: nothing is carried on
    // The segment's final bytes give the state the next segment starts from.
    if (decoded)
      engine.forward_segment(a, tokens.data(), nullptr, 1, T, state, next, false, 0, 1.f, everything);
    std::swap(state, next);
  }
  return std::vector<int32_t>(seq.begin() + P, seq.end());
}

SampleRunResult sample_run(const SampleRunRequest& req) {
  const fs::path run_dir(req.run_dir);
  if (!fs::is_directory(run_dir)) fail("{}: no such directory", run_dir.string());
  const std::string config_path = (run_dir / "config.yaml").string();
  if (req.prompt.empty())
    fail("--prompt is empty: the model predicts each byte from the bytes before it and has no "
         "start-of-text symbol; give at least one byte (e.g. a newline)");
  if (req.bytes < 1 || req.bytes > kMaxSampleBytes)
    fail("--bytes must be from 1 to {} (got {})", kMaxSampleBytes, req.bytes);
  if (!std::isfinite(req.settings.temperature) || req.settings.temperature < 0)
    fail("--temperature must be a finite number >= 0 (0: greedy), got {}", req.settings.temperature);
  check_threads(req.threads, "--threads");
  Config config = load_run_config(req.run_dir);
  validate(config);
  family_of(config).check_command("rmt sample", req.run_dir, config);
  // The run as a language model sees it; its dataset is not read (sampling needs only the
  // model), so a run whose data moved still samples.
  const bool config_sets_n_token = config.model.n_token != 0;
  if (config.model.n_token == 0) config.model.n_token = kTextVocab;
  resolve_kind(config.model);
  RunSetup run;
  run.config = config;
  run.meta = text_dataset_meta();
  run.family = &text_family();
  run.seg_len = {config.segment_length};
  run.seq_len = config.segment_length;
  std::string ck = req.checkpoint;
  if (ck == "best" || ck == "last") ck = (run_dir / (ck + ".safetensors")).string();
  if (!fs::exists(ck)) {
    if (req.checkpoint == "best" || req.checkpoint == "last")
      fail("checkpoint {} does not exist: the run has no checkpoint yet (rmt train writes one at "
           "each evaluation)", ck);
    fail("checkpoint {} does not exist", ck);
  }
  const int T = config.segment_length;
  Backend& be = run_backend(req.device, config, req.run_dir);
  auto model = load_checkpoint(ck, [&](const ModelConfig& c) {
    check_checkpoint_fits_run(c, ck, run, config_sets_n_token, config_path);
    Workload w;
    w.batch = 1;
    w.seg_len = {T};
    w.decoding = true;
    check_memory_fits(estimate_memory(c, w), fmt::format("sampling from {}", ck));
  }, be);
  set_num_threads(req.threads);
  Engine engine(*model);
  std::vector<int32_t> prompt(req.prompt.size());
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(uint8_t(req.prompt[i]));
  SampleSettings settings = req.settings;
  settings.vocab = kTextVocab;  // a model with more ids than bytes (model.n_token > 256) draws bytes
  const std::vector<int32_t> out = sample_continuation(engine, T, prompt, req.bytes, settings);
  SampleRunResult r;
  r.checkpoint = ck;
  r.kind = model->config.kind;
  r.segment_length = T;
  r.prompt = req.prompt;
  r.continuation.resize(out.size());
  for (size_t i = 0; i < out.size(); ++i) r.continuation[i] = char(uint8_t(out[i]));
  return r;
}

}  // namespace rmt
