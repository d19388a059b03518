#include "lib/run/evaluate.h"

#include <algorithm>
#include <cmath>

#include "lib/core/error.h"

namespace rmt {

namespace {

int argmax(const float* x, int n) {
  return int(std::max_element(x, x + n) - x);
}

// A row of logits holding a number that is not finite has no prediction (argmax would pick one
// by the order of the comparisons).
bool all_finite(const float* x, int n) {
  return std::all_of(x, x + n, [](float v) { return std::isfinite(v); });
}

// The teacher-forced pass over one batch input, target [B, T]: only the running segment's
// activations (diagonal: at most one per layer) and the state entering it are held, so memory
// does not grow with the number of segments (inputs far longer than training's are evaluated in
// the memory of one segment). Calls on_scored(t0, Ts, logits [B, Ts, V]) for each segment holding
// answer positions, in order, and returns the loss as Engine::forward(training = false) does, bit
// for bit, whichever the schedule: the mean over the batch's scored positions (answer positions
// whose target is not -1), whose count goes to *scored.
template <typename OnScored>
double teacher_forced_pass(Engine& engine, const int32_t* input, const int32_t* target, int B, int T,
                           const std::vector<int>& seg_len, int answer_size, EvalSchedule schedule,
                           OnScored on_scored, int64_t* scored) {
  const int N = int(seg_len.size());
  std::vector<int> seg_start(size_t(N) + 1, 0);  // segment s is positions [seg_start[s], seg_start[s + 1])
  for (int s = 0; s < N; ++s) seg_start[size_t(s) + 1] = seg_start[size_t(s)] + seg_len[size_t(s)];
  std::vector<int32_t> tokens, targets;
  // Segment s's tokens and targets [B, Ts] (-1 where not scored); whether it holds answer positions.
  auto gather = [&](int s) {
    const int t0 = seg_start[size_t(s)], Ts = seg_len[size_t(s)];
    tokens.resize(size_t(B) * Ts);
    targets.resize(size_t(B) * Ts);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < Ts; ++t) {
        const int64_t p = int64_t(b) * T + t0 + t;
        tokens[size_t(b) * Ts + t] = input[p];
        targets[size_t(b) * Ts + t] = t0 + t >= T - answer_size ? target[p] : -1;
      }
    return t0 + Ts > T - answer_size;
  };
  *scored = 0;
  for (int b = 0; b < B; ++b)
    for (int p = T - answer_size; p < T; ++p) *scored += target[int64_t(b) * T + p] >= 0;
  const float loss_scale = *scored > 0 ? 1.f / float(*scored) : 0.f;  // as Engine::stage_forward's
  double loss_sum = 0;
  auto add_scored = [&](int s, const SegmentActivations& seg) {
    loss_sum = engine.add_segment_loss(seg, loss_sum);
    on_scored(seg_start[size_t(s)], seg_len[size_t(s)], engine.segment_logits(seg));
  };
  if (schedule == EvalSchedule::diagonal) {
    RecurrentState after;
    engine.forward_diagonal(
        B, seg_len, loss_scale,
        [&](int s) {
          const bool scored = gather(s);
          return DiagonalSegmentInput{tokens.data(), scored ? targets.data() : nullptr,
                                      SegmentOutputs{scored, true}};
        },
        [&](int s, const SegmentActivations& seg) {
          if (seg.plan.logits) add_scored(s, seg);
        },
        after);
    return loss_sum * loss_scale;
  }
  RecurrentState state, next;
  engine.initial_state(state, B);
  SegmentActivations seg;
  for (int s = 0; s < N; ++s) {
    const bool scored = gather(s);
    engine.forward_segment(seg, tokens.data(), scored ? targets.data() : nullptr, B, seg_len[size_t(s)],
                           state, next, false, 0, loss_scale, SegmentOutputs{scored, true});
    if (scored) add_scored(s, seg);
    std::swap(state, next);
  }
  return loss_sum * loss_scale;
}

}  // namespace

// Greedy decoding of one batch: inputs up to the answer's start are the true ones; from there on
// the prediction at answer position p becomes the input at p+1 (the answer may start anywhere,
// mid-segment included). Writes the predictions at every answer position into pred [B, T].
// Two ways to produce a segment's answer predictions:
//  * kv_cache: one forward of the segment fills every layer's keys and values (the read block's
//    included) and gives the logits of every row whose input is already final (up to the answer
//    start, and the segment's first row); each later token row then runs alone through the
//    layers against them (Engine::decode_token_row), and a last forward with the final inputs
//    hands on the state;
//  * re-running: the whole segment runs again for every predicted token (the reference, kept for
//    tests and for stating the speed-up). Token rows are causal, so both give the same
//    predictions.
void decode_greedy(Engine& engine, const int32_t* input, int B, int T,
                   const std::vector<int>& seg_len, int answer_size, bool kv_cache,
                   std::vector<int32_t>& pred, EvalSchedule schedule) {
  if (answer_size < 1 || answer_size > T)
    fail("decode_greedy: answer size {} must be in 1..{} (the sequence length)", answer_size, T);
  std::vector<int32_t> inp(input, input + int64_t(B) * T);
  pred.assign(size_t(B) * T, -1);
  RecurrentState state, next;
  engine.initial_state(state, B);
  SegmentActivations a;
  std::vector<int32_t> tokens, ids(static_cast<size_t>(B), 0);
  std::vector<float> row_logits, seg_logits;  // host copies: [B, V], [B, Ts, V]
  const int answer_start = T - answer_size;
  int t0 = 0;
  // positions [start, start + Ts) of every row into tokens [B, Ts]
  auto gather = [&](int start, int Ts) {
    tokens.resize(size_t(B) * Ts);
    for (int b = 0; b < B; ++b)
      std::copy_n(inp.begin() + int64_t(b) * T + start, Ts, tokens.begin() + int64_t(b) * Ts);
  };
  auto full_forward = [&](int Ts, bool read_logits) {
    gather(t0, Ts);
    engine.forward_segment(a, tokens.data(), nullptr, B, Ts, state, next, false, 0, 0.f);
    if (read_logits) seg_logits = engine.segment_logits(a);
  };
  // Takes the argmax of logits [B, V] as the prediction at position p and the input at p+1; a row
  // that is not finite predicts -1 (wrong), and its argmax, a token whatever it is, goes on as
  // the input (the sample is lost already; its row does not touch the others').
  auto emit = [&](const float* logits, int64_t row_stride, int V, int p) {
    for (int b = 0; b < B; ++b) {
      const float* row = logits + b * row_stride;
      const int y = argmax(row, V);
      pred[size_t(b) * T + p] = all_finite(row, V) ? y : -1;
      if (p + 1 < T) inp[size_t(b) * T + p + 1] = y;
    }
  };
  size_t one_by_one = 0;  // the first segment run one by one
  if (schedule == EvalSchedule::diagonal) {
    // The segments before the answer's, by diagonals, asked for what full_forward asks (logits
    // and memory: the same plans, so the same state).
    std::vector<int> prefix;
    while (one_by_one < seg_len.size() && t0 + seg_len[one_by_one] <= answer_start) {
      prefix.push_back(seg_len[one_by_one]);
      t0 += seg_len[one_by_one++];
    }
    if (!prefix.empty()) {
      int start = 0;  // the next segment's first position: the segments start in order
      engine.forward_diagonal(
          B, prefix, 0.f,
          [&](int s) {
            gather(start, prefix[size_t(s)]);
            start += prefix[size_t(s)];
            return DiagonalSegmentInput{tokens.data(), nullptr, SegmentOutputs{}};
          },
          [](int, const SegmentActivations&) {}, state);
    }
  }
  for (size_t i = one_by_one; i < seg_len.size(); ++i) {
    const int Ts = seg_len[i];
    if (t0 + Ts > answer_start) {
      const int first = std::max(0, answer_start - t0);  // the segment's first answer row
      if (kv_cache) {
        full_forward(Ts, true);
        const int V = int(seg_logits.size() / (size_t(B) * Ts));
        row_logits.resize(size_t(B) * V);
        for (int j = first; j < Ts; ++j) {
          // Row j's input was final before this segment's forward when it is the segment's first
          // row or the answer's first row (whose input is the true one): take the forward's logits.
          if (j == 0 || t0 + j <= answer_start) {
            emit(seg_logits.data() + int64_t(j) * V, int64_t(Ts) * V, V, t0 + j);
            continue;
          }
          for (int b = 0; b < B; ++b) ids[size_t(b)] = inp[size_t(b) * T + t0 + j];
          engine.decode_token_row(a, j, ids.data(), row_logits.data());
          emit(row_logits.data(), V, V, t0 + j);
        }
      } else {
        for (int j = first; j < Ts; ++j) {
          full_forward(Ts, true);
          const int V = int(seg_logits.size() / (size_t(B) * Ts));
          emit(seg_logits.data() + int64_t(j) * V, int64_t(Ts) * V, V, t0 + j);
        }
      }
    }
    full_forward(Ts, false);  // the state handed on, from the segment's final inputs
    std::swap(state, next);
    t0 += Ts;
  }
}

EvalSchedule parse_eval_schedule(const std::string& name) {
  if (name == "sequential") return EvalSchedule::sequential;
  if (name == "diagonal") return EvalSchedule::diagonal;
  fail("schedule '{}' is not one of sequential, diagonal", name);
}

const char* eval_schedule_name(EvalSchedule schedule) {
  return schedule == EvalSchedule::diagonal ? "diagonal" : "sequential";
}

EvalResult evaluate(Engine& engine, const SampleSplit& split, const EvalOptions& opt) {
  const int T = split.seq_len;
  auto read = [&](int64_t start, int B, std::vector<int32_t>& input, std::vector<int32_t>& target) {
    input.assign(split.input.begin() + start * T, split.input.begin() + (start + B) * T);
    target.assign(split.target.begin() + start * T, split.target.begin() + (start + B) * T);
  };
  return evaluate(engine, split.n, T, read, opt);
}

EvalResult evaluate(Engine& engine, int64_t n, int T, const EvalBatchReader& read, const EvalOptions& opt) {
  const int A = opt.answer_size;
  if (opt.max_samples > 0) n = std::min(n, opt.max_samples);
  if (n <= 0) fail("cannot evaluate an empty split");
  const bool fr = opt.free_running;
  // One answer token is predicted from the true inputs before it: its greedy decoding is the
  // teacher-forced prediction, so it is not run again.
  // So is every answer position of a dataset with unscored targets (mqar's queries: their inputs
  // are all given).
  const bool decode = fr && A > 1 && !opt.unscored_targets;
  // Diagonal (armt only): where the engine cannot run a diagonal's layer-steps at once (one
  // thread), the grid is walked segment by segment instead: the same numbers, in the order that
  // keeps a segment's rows in cache from layer to layer.
  EvalSchedule schedule = opt.schedule;
  if (schedule == EvalSchedule::diagonal) {
    engine.check_diagonal();
    if (!engine.diagonal_overlaps()) schedule = EvalSchedule::sequential;
  }
  double loss_sum = 0;
  int64_t correct_tf = 0, correct_fr = 0, solved = 0, solved_tf = 0, exact = 0, exact_tf = 0, positions = 0;
  int64_t non_finite = 0, first_non_finite = -1;  // samples whose answer logits are not all finite
  std::vector<int32_t> pred, batch_input, batch_target;
  for (int64_t start = 0; start < n; start += opt.batch_size) {
    const int B = int(std::min<int64_t>(opt.batch_size, n - start));
    read(start, B, batch_input, batch_target);
    const int32_t* input = batch_input.data();
    const int32_t* target = batch_target.data();
    // teacher-forced predictions of the segments holding answer positions
    std::vector<uint8_t> sample_ok(size_t(B), 1), sample_exact(size_t(B), 1), sample_finite(size_t(B), 1);
    int64_t batch_correct = 0;
    if (opt.on_predictions && !decode) pred.assign(size_t(B) * T, -1);
    auto score = [&](int t0, int Ts, const std::vector<float>& logits) {
      const int V = int(logits.size() / (size_t(B) * Ts));
      for (int b = 0; b < B; ++b)
        for (int j = 0; j < Ts; ++j) {
          int p = t0 + j;
          if (p < T - A || target[int64_t(b) * T + p] < 0) continue;  // not scored
          const float* row = logits.data() + (int64_t(b) * Ts + j) * V;
          int y = argmax(row, V);
          if (!all_finite(row, V)) y = -1, sample_finite[size_t(b)] = 0;
          if (opt.on_predictions && !decode) pred[size_t(b) * T + p] = y;
          bool ok = y == target[int64_t(b) * T + p];
          batch_correct += ok;
          if (!ok) sample_exact[size_t(b)] = 0;
          if (!ok && p >= T - opt.solve_positions) sample_ok[size_t(b)] = 0;
        }
    };
    // Each batch's mean weighted by its scored positions in rows' worth (count / A, which is B
    // where every answer position is scored: the bits of the results before masks).
    int64_t scored = 0;
    loss_sum += teacher_forced_pass(engine, input, target, B, T, opt.seg_len, A, schedule, score, &scored) *
                (double(scored) / A);
    correct_tf += batch_correct;
    positions += scored;
    int64_t batch_solved_tf = 0, batch_exact_tf = 0;
    for (int b = 0; b < B; ++b) batch_solved_tf += sample_ok[size_t(b)], batch_exact_tf += sample_exact[size_t(b)];
    solved_tf += batch_solved_tf;
    exact_tf += batch_exact_tf;
    if (!decode) correct_fr += batch_correct, solved += batch_solved_tf, exact += batch_exact_tf;
    if (decode) {
      decode_greedy(engine, input, B, T, opt.seg_len, A, opt.kv_cache_decoding, pred, schedule);
      std::fill(sample_ok.begin(), sample_ok.end(), 1);
      std::fill(sample_exact.begin(), sample_exact.end(), 1);
      for (int b = 0; b < B; ++b)
        for (int p = T - A; p < T; ++p) {
          if (pred[size_t(b) * T + p] < 0) sample_finite[size_t(b)] = 0;
          bool ok = pred[size_t(b) * T + p] == target[int64_t(b) * T + p];
          correct_fr += ok;
          if (!ok) sample_exact[size_t(b)] = 0;
          if (!ok && p >= T - opt.solve_positions) sample_ok[size_t(b)] = 0;
        }
      for (int b = 0; b < B; ++b) solved += sample_ok[size_t(b)], exact += sample_exact[size_t(b)];
    }
    for (int b = 0; b < B; ++b) {
      if (sample_finite[size_t(b)]) continue;
      if (non_finite == 0) first_non_finite = start + b;
      ++non_finite;
    }
    if (opt.on_predictions) opt.on_predictions(start, B, input, target, pred.data());
  }
  // The solve rate uses greedy decoding when it runs, teacher forcing otherwise.
  EvalResult r;
  r.samples = n;
  if (positions == 0) fail("none of the {} samples has a scored position (every target is -1)", n);
  r.loss = loss_sum / (double(positions) / A);
  r.non_finite_samples = non_finite;
  if (non_finite > 0 && !opt.count_non_finite)
    fail("{} of {} samples (the first: sample {}) have answer outputs that are not finite numbers (rmt eval "
         "--count-non-finite scores them as wrong answers instead)", non_finite, n, first_non_finite);
  if (!std::isfinite(r.loss) && non_finite == 0)
    fail("the loss over {} samples is {}: the model's outputs are not finite numbers", n, r.loss);
  r.acc_teacher_forced = double(correct_tf) / double(positions);
  if (fr) r.acc_free_running = double(correct_fr) / double(positions);
  if (fr) r.exact_match = double(exact) / double(n);
  r.exact_match_teacher_forced = double(exact_tf) / double(n);
  if (opt.solve_positions > 0) {
    r.solve_rate = double(solved) / double(n);
    r.solve_rate_teacher_forced = double(solved_tf) / double(n);
  }
  return r;
}

}  // namespace rmt
