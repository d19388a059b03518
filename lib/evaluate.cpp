#include "lib/evaluate.h"

#include <algorithm>

#include "lib/error.h"

namespace rmt {

namespace {

int argmax(const float* x, int n) {
  return int(std::max_element(x, x + n) - x);
}

// Greedy decoding of one batch: segments before the answer run on the true input; inside the
// answer each prediction becomes the next input. Every token of an answer segment is produced
// by re-running the segment on the inputs known so far (its token rows are causal, so later
// inputs do not change earlier logits). Writes the predictions at every answer position.
void decode_greedy(Engine& engine, const int32_t* input, int B, int T,
                   const std::vector<int>& seg_len, int answer_size, std::vector<int32_t>& pred) {
  std::vector<int32_t> inp(input, input + int64_t(B) * T);
  pred.assign(size_t(B) * T, -1);
  RecurrentState state, next;
  engine.initial_state(state, B);
  SegmentActivations a;
  std::vector<int32_t> tokens;
  const int answer_start = T - answer_size;
  int t0 = 0;
  for (int Ts : seg_len) {
    tokens.resize(size_t(B) * Ts);
    auto gather = [&] {
      for (int b = 0; b < B; ++b)
        std::copy(inp.begin() + int64_t(b) * T + t0, inp.begin() + int64_t(b) * T + t0 + Ts,
                  tokens.begin() + int64_t(b) * Ts);
    };
    if (t0 + Ts <= answer_start) {  // a segment before the answer
      gather();
      engine.forward_segment(a, tokens.data(), nullptr, B, Ts, state, next, false, 0, 0.f);
    } else {
      for (int j = 0; j < Ts; ++j) {
        gather();
        engine.forward_segment(a, tokens.data(), nullptr, B, Ts, state, next, false, 0, 0.f);
        const int V = int(a.logits.size() / (size_t(B) * Ts));
        for (int b = 0; b < B; ++b) {
          int p = argmax(a.logits.data() + (int64_t(b) * Ts + j) * V, V);
          pred[size_t(b) * T + t0 + j] = p;
          if (t0 + j + 1 < T) inp[size_t(b) * T + t0 + j + 1] = p;
        }
      }
    }
    std::swap(state, next);
    t0 += Ts;
  }
}

}  // namespace

bool answer_spans_whole_segments(const std::vector<int>& seg_len, int answer_size) {
  int total = 0;
  for (int len : seg_len) total += len;
  int start = total - answer_size, t = 0;
  for (int len : seg_len) {
    if (t == start) return true;
    t += len;
  }
  return false;
}

EvalResult evaluate(Engine& engine, const LmSplit& split, const EvalOptions& opt) {
  const int T = split.seq_len, A = opt.answer_size;
  int64_t n = split.n;
  if (opt.max_samples > 0) n = std::min(n, opt.max_samples);
  if (n <= 0) fail("cannot evaluate an empty split");
  const bool fr = opt.free_running && answer_spans_whole_segments(opt.seg_len, A);
  double loss_sum = 0;
  int64_t correct_tf = 0, correct_fr = 0, solved = 0, positions = 0;
  std::vector<int32_t> pred;
  for (int64_t start = 0; start < n; start += opt.batch_size) {
    const int B = int(std::min<int64_t>(opt.batch_size, n - start));
    const int32_t* input = split.input.data() + start * T;
    const int32_t* target = split.target.data() + start * T;
    double loss = engine.forward(input, target, B, T, opt.seg_len, A, false, 0);
    loss_sum += loss * B;
    // teacher-forced predictions, segment by segment
    std::vector<uint8_t> sample_ok(size_t(B), 1);
    int t0 = 0;
    for (int s = 0; s < engine.num_segments(); ++s) {
      const SegmentActivations& a = engine.segment(s);
      const int V = int(a.logits.size() / (size_t(B) * a.T));
      for (int b = 0; b < B; ++b)
        for (int j = 0; j < a.T; ++j) {
          int p = t0 + j;
          if (p < T - A) continue;
          bool ok = argmax(a.logits.data() + (int64_t(b) * a.T + j) * V, V) == target[int64_t(b) * T + p];
          correct_tf += ok;
          if (!ok && p >= T - opt.solve_positions) sample_ok[size_t(b)] = 0;
        }
      t0 += a.T;
    }
    positions += int64_t(B) * A;
    if (fr) {
      decode_greedy(engine, input, B, T, opt.seg_len, A, pred);
      std::fill(sample_ok.begin(), sample_ok.end(), 1);
      for (int b = 0; b < B; ++b)
        for (int p = T - A; p < T; ++p) {
          bool ok = pred[size_t(b) * T + p] == target[int64_t(b) * T + p];
          correct_fr += ok;
          if (!ok && p >= T - opt.solve_positions) sample_ok[size_t(b)] = 0;
        }
    }
    for (uint8_t ok : sample_ok) solved += ok;
  }
  // The solve rate uses greedy decoding where it runs, teacher forcing otherwise.
  EvalResult r;
  r.samples = n;
  r.loss = loss_sum / double(n);
  r.acc_teacher_forced = double(correct_tf) / double(positions);
  if (fr) r.acc_free_running = double(correct_fr) / double(positions);
  if (opt.solve_positions > 0) r.solve_rate = double(solved) / double(n);
  return r;
}

}  // namespace rmt
