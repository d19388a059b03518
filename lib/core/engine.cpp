// Forward of the models of docs/paper.md over the segments of a batch (the backward:
// lib/core/engine_backward.cpp).
//
// Shapes, as the code names them (every activation is time-major: row t of sample b is buffer
// row t*B + b, see engine.h):
//   B     batch (samples)                 T     tokens in the segment
//   m     memory tokens (num_mem)         m_write  write-block rows run (m or 0)
//   mlen  cache rows entering (Transformer-XL, keys and values only)
//   q     query rows = m + T + m_write    klen  key rows = mlen + q
//   d     d_model        H  heads         Dh  d_head        HD  H * Dh
//   di    d_inner        V  vocabulary    L   layers
//   Bd    B * d, one position of the whole batch
// What a segment computes (q, klen, m_write, the live rows of the last layer, logits, memory
// passed on, cache handed on) is its SegmentPlan (lib/core/segment_plan.h), derived in one
// place that the FLOP count and the memory estimate share.
//
// The engine walks segments over layers; what acts at a segment's boundary or around a layer
// stands in files of its own, each doing nothing for a kind without it:
//   the layer           lib/core/layer.h         (its token mixer: lib/core/attention.h, which
//                                                 also carries the Transformer-XL cache)
//   memory tokens       lib/core/memory_tokens.h  state.mem -> the read rows of h0; the output
//                                                 rows at plan.mem_out_row -> next.mem
//   associative memory  lib/core/assoc_memory.h   armt's A and z: read before every layer,
//                                                 written after it
#include "lib/core/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "lib/core/assoc_memory.h"
#include "lib/core/error.h"
#include "lib/core/layer.h"
#include "lib/core/memory_tokens.h"
#include "lib/core/mixer.h"
#include "lib/core/random.h"

namespace rmt {

namespace {

// dst[t, b] = src[b, t] for an [n, m] src (host: token ids and targets to time-major, logits
// back to the caller's order).
template <typename T>
void transpose(T* dst, const T* src, int n, int m, int width = 1) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j)
      std::copy_n(src + (int64_t(i) * m + j) * width, width, dst + (int64_t(j) * n + i) * width);
}

// The attention mask of docs/paper.md §2 (1 = blocked), keys [cache | read | tokens | write].
// causal_write (armt): the write rows are causal among themselves as every other row, as in the
// authors' ARMT (a GPT-2 with the memory tokens appended: one lower-triangular mask).
void build_mask(uint8_t* mask, int q, int mlen, int m_read, int m_write, bool read_from_cache,
                bool causal_write) {
  const int klen = q + mlen;
  for (int i = 0; i < q; ++i)
    for (int j = 0; j < klen; ++j) mask[i * klen + j] = j > i + mlen;
  for (int i = 0; i < m_read; ++i) {
    for (int j = 0; j < m_read; ++j) mask[i * klen + mlen + j] = 0;
    for (int j = 0; j < mlen; ++j) mask[i * klen + j] = !read_from_cache;
  }
  if (causal_write) return;
  for (int i = q - m_write; i < q; ++i) {
    for (int j = klen - m_write; j < klen; ++j) mask[i * klen + j] = 0;
    for (int j = 0; j < mlen; ++j) mask[i * klen + j] = !read_from_cache;
  }
}


}  // namespace

Engine::Engine(Model& model)
    : model_(model), be_(model.backend),
      plan_model_{model.num_mem, model.mem_len, model.write_block, model.read_block,
                  traits_of(model.kind).has_mixer_state()} {}

Engine::Engine(Model& model, Backend& backend)
    : model_(model), be_(backend),
      plan_model_{model.num_mem, model.mem_len, model.write_block, model.read_block,
                  traits_of(model.kind).has_mixer_state()} {
  if (&backend != &model.backend)
    throw std::logic_error("Engine: the backend is not the one the model's parameters live on");
}

float Engine::dropout_p(bool training) const {
  return training ? float(model_.config.dropout) : 0.f;
}

const uint8_t* Engine::mask_for(const SegmentPlan& plan) {
  DeviceArray<uint8_t>& mask = masks_[{plan.q, plan.mlen, plan.m_read, plan.m_write}];
  if (mask.empty()) {
    host_.mask.resize(size_t(plan.q) * size_t(plan.klen));
    build_mask(host_.mask.data(), plan.q, plan.mlen, plan.m_read, plan.m_write,
               model_.config.read_mem_from_cache, traits_of(model_.kind).causal_write);
    mask.upload(be_, host_.mask);
  }
  return mask.data();
}

void Engine::initial_state(RecurrentState& state, int B) const {
  const Model& M = model_;
  state.mlen = 0;
  state.cache.resize(size_t(M.mem_len > 0 ? M.L : 0));
  // [num_mem, B, d]: memory row i of every sample
  state.assoc_written = false;  // armt: no memory yet (its A and z are sized when written)
  memory_tokens_initial(be_, M, state, B);
  const int64_t mixer = mixer_state_floats(M, B);  // deltanet, gated_deltanet: S = 0, no rows yet
  if (mixer > 0) state.mixer.zeroed(be_, mixer);
}

void Engine::upload_segment(DeviceArray<int32_t>& ids, DeviceArray<int32_t>* targets_dev,
                            const int32_t* tokens, const int32_t* targets, int B, int T) {
  // [B, T] on the host -> time-major [T, B] in the backend's memory.
  host_.ids.resize(size_t(T) * B);
  transpose(host_.ids.data(), tokens, B, T);
  ids.upload(be_, host_.ids);
  if (targets_dev) {
    host_.targets.resize(size_t(T) * B);
    transpose(host_.targets.data(), targets, B, T);
    targets_dev->upload(be_, host_.targets);
  }
}

void Engine::forward_segment(SegmentActivations& seg, const int32_t* tokens,
                             const int32_t* targets, int B, int T, const RecurrentState& state,
                             RecurrentState& next, bool training, uint64_t seed, float loss_scale,
                             SegmentOutputs outputs) {
  upload_segment(seg.ids, targets ? &seg.targets : nullptr, tokens, targets, B, T);
  const bool dropout = dropout_p(training) > 0;
  if (dropout) seg.seed.upload(be_, {seed});
  run_segment(seg, plan_segment(plan_model_, T, state.mlen, training, outputs), seg.ids.data(),
              targets ? seg.targets.data() : nullptr, B, state, next, training,
              dropout ? seg.seed.data() : nullptr, loss_scale);
}

void Engine::run_segment(SegmentActivations& seg, const SegmentPlan& plan, const int32_t* ids,
                         const int32_t* targets, int B, const RecurrentState& state,
                         RecurrentState& next, bool training, const uint64_t* seed,
                         float loss_scale) {
  const float* x = begin_segment(seg, plan, ids, B, state, next, training, seed);  // layer input [q, B, d]
  seg.layers.resize(size_t(model_.L));
  for (int l = 0; l < model_.L && x; ++l)
    x = run_layer(seg, seg.layers[size_t(l)], l, x, state, next, training, seed);
  next.mlen = plan.next_mlen;
  next.assoc_written = seg.assoc_write;
  if (plan.live() > 0) end_segment(seg, x, targets, next, training, seed, loss_scale);
}

const float* Engine::begin_segment(SegmentActivations& seg, const SegmentPlan& plan,
                                   const int32_t* ids, int B, const RecurrentState& state,
                                   RecurrentState& next, bool training, const uint64_t* seed) {
  Model& M = model_;
  const Weights& W = M.W;
  const int d = M.d, m = plan.m_read;  // token rows from m
  const int T = plan.T, q = plan.q, klen = plan.klen;
  if (state.mlen != plan.mlen) throw std::logic_error("run_segment: the plan's cache is not the state's");
  const int64_t Bd = int64_t(B) * d;  // one position of the whole batch
  const float p = dropout_p(training);
  seg.B = B;
  seg.plan = plan;
  seg.has_logits = false;
  seg.token_ids = ids;
  assoc_begin_segment(be_, M, seg, state, next);
  ++segment_runs_;
  const bool positions = mixer_uses_positions(M);  // attention's mask and position table
  seg.mask = positions ? mask_for(plan) : nullptr;
  next.cache.resize(state.cache.size());
  const int64_t mixer = mixer_state_floats(M, B);  // the mixers' state: read, and the next written
  if (mixer > 0 && state.mixer.size() != mixer)
    throw std::logic_error("run_segment: the state's mixer part does not fit the batch");
  seg.mixer_in = mixer > 0 ? state.mixer.data() : nullptr;
  if (mixer > 0) next.mixer.sized(be_, mixer);

  // Input rows: [read memory | embedded tokens * sqrt(d) | write memory (same vectors)].
  float* h0 = sized(seg.h0, int64_t(q) * Bd);
  be_.embedding_forward(h0 + m * Bd, ids, W.emb, T * B, d, std::sqrt(float(d)));
  memory_tokens_in(be_, M, plan, state, h0, B);
  if (p > 0) be_.dropout_forward(h0, h0, sized(seg.keep_h0, q * Bd), q * Bd, p, {seed, 1});
  if (positions) {
    float* pos = sized(seg.pos, int64_t(klen) * d);
    be_.positional_embedding(pos, klen, d);
    if (p > 0) be_.dropout_forward(pos, pos, sized(seg.keep_pos, int64_t(klen) * d), int64_t(klen) * d, p,
                                   {seed, 2});
  }
  return h0;
}

LayerStep Engine::layer_step(const SegmentActivations& seg, int l, bool training,
                             const uint64_t* seed) const {
  return {be_, model_, seg.plan, seg.B, l, dropout_p(training), seed, seg.pos.data(), seg.mask,
          seg.mixer_in};
}

const float* Engine::run_layer(SegmentActivations& seg, LayerActivations& act, int l,
                               const float* x, const RecurrentState& state, RecurrentState& next,
                               bool training, const uint64_t* seed) {
  const LayerStep st = layer_step(seg, l, training, seed);
  x = assoc_layer_read(st, seg, act.assoc, x);  // armt: x + what the associative memory gives (else x)
  const float* h2 = layer_forward(st, act, x, state, next);
  if (h2) assoc_layer_write(st, seg, act.assoc, h2, next);  // armt: A and z of the next state
  return h2;
}

void Engine::end_segment(SegmentActivations& seg, const float* x, const int32_t* targets,
                         RecurrentState& next, bool training, const uint64_t* seed,
                         float loss_scale) {
  const Model& M = model_;
  const SegmentPlan& plan = seg.plan;
  const int B = seg.B, T = plan.T, V = M.V, q = plan.q;
  const int64_t Bd = int64_t(B) * M.d;
  // The live rows of the last layer's output, after the final dropout.
  const int64_t lo = plan.live_begin * Bd, n_out = plan.live() * Bd;
  float* out = sized(seg.out, q * Bd);
  be_.dropout_forward(out + lo, x + lo, sized(seg.keep_out, q * Bd) + lo, n_out, dropout_p(training),
                      {seed, 6});
  if (plan.logits) {  // logits of the token rows through the tied embedding
    float* logits = sized(seg.logits, int64_t(T) * B * V);
    be_.matmul(logits, out + plan.m_read * Bd, M.W.emb, T * B, V, M.d, false, true);
    be_.add_bias(logits, M.W.out_bias, T * B, V);
    seg.has_logits = true;
    if (targets) {
      be_.cross_entropy(sized(seg.loss_rows, int64_t(T) * B), sized(seg.dlogits, int64_t(T) * B * V),
                        logits, targets, T * B, V, loss_scale);
    }
  }
  memory_tokens_out(be_, M, plan, out, next, B);
}

std::vector<uint8_t> Engine::segment_mask(const SegmentActivations& seg) const {
  const SegmentPlan& plan = seg.plan;
  std::vector<uint8_t> mask(size_t(plan.q) * size_t(plan.klen));
  build_mask(mask.data(), plan.q, plan.mlen, plan.m_read, plan.m_write,
             model_.config.read_mem_from_cache, traits_of(model_.kind).causal_write);
  return mask;
}

std::vector<float> Engine::segment_logits(const SegmentActivations& seg) const {
  if (!seg.has_logits) throw std::logic_error("segment_logits: the segment computed no logits");
  const std::vector<float> tb = seg.logits.download();  // [T, B, V]
  std::vector<float> bt(tb.size());
  transpose(bt.data(), tb.data(), seg.plan.T, seg.B, model_.V);
  return bt;
}

double Engine::add_segment_loss(const SegmentActivations& seg, double sum) {
  if (!seg.has_logits) throw std::logic_error("add_segment_loss: the segment computed no logits");
  // The kernel run_forward sums with, on the same words: the same bits either way.
  double* word = result_words();
  be_.copy_host_to_device(word, &sum, sizeof sum);
  be_.accumulate_sum(word, seg.loss_rows.data(), seg.loss_rows.size());
  be_.copy_device_to_host(&sum, word, sizeof sum);
  return sum;
}

void Engine::decode_token_row(SegmentActivations& seg, int t, const int32_t* ids,
                              float* logits) {
  Model& M = model_;
  const Weights& W = M.W;
  const int B = seg.B, d = M.d, V = M.V;
  ++segment_runs_;
  const int row = seg.plan.mlen + seg.plan.m_read + t;  // the token's row among the keys
  decode_.size(be_, M, B, row + 1);                     // it attends to every key up to itself
  decode_.ids.write(0, ids, B);
  float* x = decode_.x.data();
  be_.embedding_forward(x, decode_.ids.data(), W.emb, B, d, std::sqrt(float(d)));
  for (int l = 0; l < M.L; ++l) {
    const LayerStep st = layer_step(seg, l, false, nullptr);
    assoc_decode_read(st, seg, x, decode_);  // armt: the row's input plus what A_l gives for it
    layer_decode_row(st, seg.layers[size_t(l)], row, x, decode_);
  }
  float* out = decode_.logits.data();
  be_.matmul(out, x, W.emb, B, V, d, false, true);
  be_.add_bias(out, W.out_bias, B, V);
  decode_.logits.read(0, logits, int64_t(B) * V);
}

void Engine::stage_forward(const int32_t* input, const int32_t* target, int B, int T,
                           const std::vector<int>& seg_len, int answer_size, bool training,
                           uint64_t dropout_seed, const Carry& carry) {
  const int N = int(seg_len.size());
  if (answer_size <= 0 || answer_size > T) fail("answer_size {} outside 1..{}", answer_size, T);
  const Model& M = model_;
  assoc_check_start(M, carry.start);
  if (const RecurrentState* st = carry.start) {
    if (st->mem.size() != int64_t(B) * M.num_mem * M.d || st->mlen < 0 || st->mlen > M.mem_len ||
        st->cache.size() != size_t(M.mem_len > 0 ? M.L : 0))
      fail("forward: the start state does not fit this model and batch of {}", B);
    for (const auto& c : st->cache)
      if (c.size() != int64_t(st->mlen) * B * M.d)
        fail("forward: the start state's cache does not fit this model and batch of {}", B);
    if (st->mixer.size() != mixer_state_floats(M, B))
      fail("forward: the start state's delta-rule state does not fit this model and batch of {}", B);
  }
  fwd_.seg_len = seg_len;
  fwd_.training = training;
  fwd_.batch = B;
  fwd_.recomputing = recompute_;
  fwd_.segs.resize(fwd_.recomputing ? 0 : size_t(N));
  fwd_.seg_logits.resize(fwd_.recomputing ? size_t(N) : 0);
  fwd_.states.resize(size_t(N) + 1);
  fwd_.from_initial = carry.start == nullptr;
  // A carried start state is copied into the engine's own buffers here, before the device's part:
  // a captured step then reads it where every replay finds the step's own (train_step).
  if (carry.start) fwd_.carry_in = *carry.start;
  plan_forward(fwd_.plans, plan_model_, seg_len, T - answer_size, training, carry.pass_on,
               fwd_.from_initial ? 0 : carry.start->mlen);
  if (dropout_p(training) > 0) {  // each segment's dropout seed, with the batch
    std::vector<uint64_t> seeds(static_cast<size_t>(N));
    for (int s = 0; s < N; ++s) seeds[size_t(s)] = mix_seed(dropout_seed, uint64_t(s));
    fwd_.segment_seeds.upload(be_, seeds);
  }
  // Each segment's tokens and targets (-1 where the position is not scored), time-major [T_s, B],
  // one after the other in one upload. A target of -1 inside the answer is a position the dataset
  // leaves unscored (mqar): the loss is the mean over the positions that are scored.
  int64_t scored = 0;
  fwd_.batch_at.assign(size_t(N), 0);
  host_.batch.clear();
  int t0 = 0;
  for (int s = 0; s < N; ++s) {
    const int Ts = seg_len[size_t(s)];
    if (fwd_.plans[size_t(s)].run) {  // a segment that feeds nothing is not run (run_forward)
      const size_t at = host_.batch.size();
      fwd_.batch_at[size_t(s)] = int64_t(at);
      host_.batch.resize(at + 2 * size_t(Ts) * B);
      int32_t* ids = host_.batch.data() + at;
      int32_t* targets = ids + size_t(Ts) * B;
      for (int t = 0; t < Ts; ++t)
        for (int b = 0; b < B; ++b) {
          const int pos = t0 + t;
          ids[size_t(t) * B + b] = input[int64_t(b) * T + pos];
          const int32_t y = pos >= T - answer_size ? target[int64_t(b) * T + pos] : -1;
          targets[size_t(t) * B + b] = y;
          scored += y >= 0;
        }
    }
    t0 += Ts;
  }
  // B x answer_size where every answer position is scored (the same float as before masks).
  fwd_.loss_scale = scored > 0 ? 1.f / float(scored) : 0.f;
  fwd_.batch_tokens.upload(be_, host_.batch);
}

void Engine::run_forward(double* loss_sum) {
  const int N = num_segments();
  if (fwd_.from_initial)
    initial_state(fwd_.states[0], fwd_.batch);
  else
    fwd_.states[0] = fwd_.carry_in;
  for (int s = 0; s < N; ++s) {
    // A segment that feeds nothing (plan.run: no loss, no memory or cache passed on) is not run.
    const SegmentPlan& plan = fwd_.plans[size_t(s)];
    if (!plan.run) {
      fwd_.states[size_t(s) + 1] = fwd_.states[size_t(s)];
      continue;
    }
    SegmentActivations& seg = fwd_.recomputing ? recomputed_.seg : fwd_.segs[size_t(s)];
    run_segment(seg, plan, segment_ids(s), segment_targets(s), fwd_.batch,
                fwd_.states[size_t(s)], fwd_.states[size_t(s) + 1], fwd_.training, segment_seed(s), fwd_.loss_scale);
    if (!plan.logits) continue;
    be_.accumulate_sum(loss_sum, seg.loss_rows.data(), seg.loss_rows.size());
    if (fwd_.recomputing) fwd_.seg_logits[size_t(s)] = seg.logits;
  }
}

double forward_loss(Engine& engine, const int32_t* input, const int32_t* target, int B, int T,
                    const std::vector<int>& seg_len, int answer_size, bool training,
                    uint64_t dropout_seed, const Carry& carry) {
  engine.stage_forward(input, target, B, T, seg_len, answer_size, training, dropout_seed, carry);
  Backend& be = engine.backend();
  double* words = engine.result_words();
  be.fill_bytes(words, 0, sizeof(double));
  engine.run_forward(words);
  double loss_sum = 0;
  be.copy_device_to_host(&loss_sum, words, sizeof loss_sum);
  return loss_sum * engine.loss_scale();
}

const RecurrentState& Engine::state(int s) const {
  if (s < 0 || s >= int(fwd_.states.size())) fail("state({}): the last forward had {} segments", s, num_segments());
  return fwd_.states[size_t(s)];
}

std::vector<float> Engine::logits(int s) const {
  if (!fwd_.plans[size_t(s)].logits)
    fail("the logits of segment {} were not computed: no loss depends on them in training", s);
  if (!fwd_.recomputing) return segment_logits(fwd_.segs[size_t(s)]);
  const std::vector<float> tb = fwd_.seg_logits[size_t(s)].download();  // [T, B, V]
  std::vector<float> bt(tb.size());
  transpose(bt.data(), tb.data(), fwd_.seg_len[size_t(s)], fwd_.batch, model_.V);
  return bt;
}

}  // namespace rmt
