#include "lib/core/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lib/core/error.h"
#include "lib/core/random.h"

namespace rmt {

namespace {

template <typename T>
T* sized(std::vector<T>& v, int64_t n) {  // resize without shrinking capacity
  v.resize(size_t(n));
  return v.data();
}

// dst[t, b] = src[b, t] for an [n, m] src (token ids and targets to time-major and back).
template <typename T>
void transpose(T* dst, const T* src, int n, int m, int width = 1) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j)
      std::copy_n(src + (int64_t(i) * m + j) * width, width, dst + (int64_t(j) * n + i) * width);
}

// The attention mask of docs/paper.md §2 (1 = blocked), keys [cache | read | tokens | write].
void build_mask(uint8_t* mask, int q, int mlen, int m_read, int m_write, bool read_from_cache) {
  const int klen = q + mlen;
  for (int i = 0; i < q; ++i)
    for (int j = 0; j < klen; ++j) mask[i * klen + j] = j > i + mlen;
  for (int i = 0; i < m_read; ++i) {
    for (int j = 0; j < m_read; ++j) mask[i * klen + mlen + j] = 0;
    for (int j = 0; j < mlen; ++j) mask[i * klen + j] = !read_from_cache;
  }
  for (int i = q - m_write; i < q; ++i) {
    for (int j = klen - m_write; j < klen; ++j) mask[i * klen + j] = 0;
    for (int j = 0; j < mlen; ++j) mask[i * klen + j] = !read_from_cache;
  }
}

}  // namespace

Engine::Engine(Model& model, Backend& backend) : model_(model), be_(backend) {}

float Engine::dropout_p(bool training) const {
  return training ? float(model_.config.dropout) : 0.f;
}

void Engine::initial_state(RecurrentState& state, int B) const {
  const Model& M = model_;
  state.mlen = 0;
  state.cache.assign(size_t(M.mem_len > 0 ? M.L : 0), {});
  state.mem.resize(size_t(B) * M.m * M.d);  // [m, B, d]: memory row i of every sample
  for (int i = 0; i < M.m; ++i)
    for (int b = 0; b < B; ++b)
      std::copy_n(M.W.mem + int64_t(i) * M.d, M.d, state.mem.data() + (int64_t(i) * B + b) * M.d);
}

void Engine::forward_segment(SegmentActivations& a, const int32_t* tokens, const int32_t* targets,
                             int B, int T, const RecurrentState& state, RecurrentState& next,
                             bool training, uint64_t seed, float loss_scale, SegmentOutputs need) {
  Model& M = model_;
  const Weights& W = M.W;
  const int d = M.d, HD = M.H * M.Dh, di = M.d_inner, V = M.V, m = M.m;
  if (m == 0) need.memory = false;
  // No other row attends to the write block (docs/paper.md mask): it only makes the memory passed
  // on. A training segment whose memory nothing reads (the last) runs without it.
  const int m_write = M.write_block && (need.memory || !training) ? m : 0;
  const int q = m + T + m_write, mlen = state.mlen, klen = q + mlen;
  const int64_t Bd = int64_t(B) * d;  // one position of the whole batch
  const float p = dropout_p(training);
  a.B = B, a.T = T, a.q = q, a.mlen = mlen, a.klen = klen, a.m_write = m_write;

  transpose(sized(a.ids, int64_t(T) * B), tokens, B, T);
  if (targets) transpose(sized(a.targets, int64_t(T) * B), targets, B, T);
  build_mask(sized(a.mask, int64_t(q) * klen), q, mlen, m, m_write, M.config.read_mem_from_cache);

  // The last layer's rows past attention: the token rows if logits are needed, the memory rows
  // passed on (write block; mt: the read block) if memory is. Everything in evaluation.
  const int mem_row = m_write ? m + T : 0;  // first row of the memory passed on
  a.live_begin = q, a.live_end = 0;
  auto live = [&](int begin, int end) {
    a.live_begin = std::min(a.live_begin, begin);
    a.live_end = std::max(a.live_end, end);
  };
  if (!training) live(0, q);
  if (need.logits) live(m, m + T);
  if (need.memory) live(mem_row, mem_row + m);
  const bool last_layer = a.live_begin < a.live_end;

  // Input rows: [read memory | embedded tokens * sqrt(d) | write memory (same vectors)].
  float* h0 = sized(a.h0, int64_t(q) * Bd);
  be_.embedding_forward(h0 + m * Bd, a.ids.data(), W.emb, T * B, d, std::sqrt(float(d)));
  if (m > 0) {
    std::copy_n(state.mem.data(), m * Bd, h0);
    if (m_write) std::copy_n(state.mem.data(), m * Bd, h0 + (m + T) * Bd);
  }
  if (p > 0) be_.dropout_forward(h0, h0, sized(a.keep_h0, q * Bd), q * Bd, p, mix_seed(seed, 1));
  float* pos = sized(a.pos, int64_t(klen) * d);
  be_.positional_embedding(pos, klen, d);
  if (p > 0) be_.dropout_forward(pos, pos, sized(a.keep_pos, int64_t(klen) * d), int64_t(klen) * d, p,
                                 mix_seed(seed, 2));

  a.layers.resize(size_t(M.L));
  next.cache.assign(state.cache.size(), {});
  const int new_mlen = M.mem_len > 0 ? std::min(M.mem_len, klen) : 0;
  AttentionShape shape{B, M.H, M.Dh, q, klen};
  const float scale = 1.f / std::sqrt(float(M.Dh));
  const float* x = h0;  // layer input [q, B, d]
  for (int l = 0; l < M.L; ++l) {
    const LayerWeights& w = W.layers[size_t(l)];
    LayerActivations& A = a.layers[size_t(l)];
    // keys and values over [cache; x]; only the current rows ask queries.
    const float* cat = x;
    if (mlen > 0) {
      float* c = sized(A.cat, int64_t(klen) * Bd);
      std::copy_n(state.cache[size_t(l)].data(), mlen * Bd, c);
      std::copy_n(x, q * Bd, c + mlen * Bd);
      cat = c;
    }
    if (new_mlen > 0)  // the next cache: the last mem_len rows of [cache; x], detached
      next.cache[size_t(l)].assign(cat + (klen - new_mlen) * Bd, cat + klen * Bd);
    if (l == M.L - 1 && !last_layer) break;  // the next state has what it needs
    float* qkv = sized(A.qkv, int64_t(klen) * B * 3 * HD);
    if (mlen > 0)  // cache rows: keys and values only (columns HD..3HD)
      be_.matmul_strided(qkv + HD, 3 * HD, cat, d, w.qkv_w + int64_t(HD) * d, d, mlen * B,
                         2 * HD, d, false, true);
    be_.matmul(qkv + int64_t(mlen) * B * 3 * HD, x, w.qkv_w, q * B, 3 * HD, d, false, true);
    float* r = sized(A.r, int64_t(klen) * HD);
    be_.matmul(r, pos, w.r_w, klen, HD, d, false, true);
    float* av = sized(A.av, q * int64_t(B) * HD);
    if (l == M.L - 1) shape.q_begin = a.live_begin, shape.q_end = a.live_end;  // live rows only
    be_.rel_attention_forward(av, sized(A.prob, int64_t(B) * M.H * q * klen), qkv, r, W.u, W.v,
                              a.mask.data(), shape, scale);
    // Past attention each row is on its own: the last layer runs only the live rows.
    const int r0 = l == M.L - 1 ? a.live_begin : 0, r1 = l == M.L - 1 ? a.live_end : q;
    const int n = (r1 - r0) * B;
    const int64_t o = int64_t(r0) * B;  // first buffer row
    // a = x + dropout(o_net(av)); h1 = LayerNorm(a)
    float* ares = sized(A.a, q * Bd) + o * d;
    be_.matmul(ares, av + o * HD, w.o_w, n, d, HD, false, true);
    if (p > 0)
      be_.dropout_forward(ares, ares, sized(A.keep_o, q * Bd) + o * d, n * int64_t(d), p,
                          mix_seed(seed, 3, l));
    be_.add_inplace(ares, x + o * d, n * int64_t(d));
    float* h1 = sized(A.h1, q * Bd) + o * d;
    be_.layernorm_forward(h1, sized(A.ln1_mean, q * B) + o, sized(A.ln1_rstd, q * B) + o, ares,
                          w.ln1_w, w.ln1_b, n, d);
    // c = h1 + dropout(W2 dropout(relu(W1 h1 + b1)) + b2); h2 = LayerNorm(c)
    float* f1 = sized(A.f1, int64_t(q) * B * di) + o * di;
    be_.matmul(f1, h1, w.ff1_w, n, di, d, false, true);
    be_.add_bias(f1, w.ff1_b, n, di);
    be_.relu_forward(f1, f1, int64_t(n) * di);
    const float* f1_used = f1;
    if (p > 0) {
      float* f1d = sized(A.f1_drop, int64_t(q) * B * di) + o * di;
      be_.dropout_forward(f1d, f1, sized(A.keep_f1, int64_t(q) * B * di) + o * di, int64_t(n) * di, p,
                          mix_seed(seed, 4, l));
      f1_used = f1d;
    }
    float* c = sized(A.c, q * Bd) + o * d;
    be_.matmul(c, f1_used, w.ff2_w, n, d, di, false, true);
    be_.add_bias(c, w.ff2_b, n, d);
    if (p > 0)
      be_.dropout_forward(c, c, sized(A.keep_f2, q * Bd) + o * d, n * int64_t(d), p,
                          mix_seed(seed, 5, l));
    be_.add_inplace(c, h1, n * int64_t(d));
    float* h2 = sized(A.h2, q * Bd);
    be_.layernorm_forward(h2 + o * d, sized(A.ln2_mean, q * B) + o, sized(A.ln2_rstd, q * B) + o, c,
                          w.ln2_w, w.ln2_b, n, d);
    x = h2;
  }
  next.mlen = new_mlen;
  if (!last_layer) return;

  // The live rows of the last layer's output, after the final dropout.
  const int64_t lo = a.live_begin * Bd, n_out = (a.live_end - a.live_begin) * Bd;
  float* out = sized(a.out, q * Bd);
  be_.dropout_forward(out + lo, x + lo, sized(a.keep_out, q * Bd) + lo, n_out, p, mix_seed(seed, 6));
  if (need.logits) {  // logits of the token rows through the tied embedding
    float* logits = sized(a.logits_tb, int64_t(T) * B * V);
    be_.matmul(logits, out + m * Bd, W.emb, T * B, V, d, false, true);
    be_.add_bias(logits, W.out_bias, T * B, V);
    transpose(sized(a.logits, int64_t(B) * T * V), logits, T, B, V);
    if (targets) {
      be_.cross_entropy(sized(a.loss_rows, int64_t(T) * B), sized(a.dlogits, int64_t(T) * B * V),
                        logits, a.targets.data(), T * B, V, loss_scale);
    }
  }
  // The memory passed on: the write rows' output (rmt, xl_rmt) or the read rows' (mt).
  if (need.memory) next.mem.assign(out + mem_row * Bd, out + (mem_row + m) * Bd);
}

void Engine::decode_token_row(SegmentActivations& a, int t, const int32_t* ids, float* logits) {
  Model& M = model_;
  const Weights& W = M.W;
  const int B = a.B, d = M.d, HD = M.H * M.Dh, di = M.d_inner, V = M.V;
  const int row = a.mlen + M.m + t;  // the token's row among the keys
  const int klen = row + 1;          // it attends to every key up to itself
  float* x = sized(row_x_, int64_t(B) * d);
  be_.embedding_forward(x, ids, W.emb, B, d, std::sqrt(float(d)));
  float* av = sized(row_av_, int64_t(B) * HD);
  float* ares = sized(row_a_, int64_t(B) * d);
  float* f1 = sized(row_f_, int64_t(B) * di);
  float* stats = sized(row_stats_, 2 * int64_t(B));
  uint8_t* mask = sized(row_mask_, klen);
  std::fill(mask, mask + klen, uint8_t(0));
  // One query row over keys [0, klen), a prefix of the segment's qkv buffer; the position table
  // is the segment's, shifted so that its last row is distance 0 from the query.
  const AttentionShape shape{B, M.H, M.Dh, 1, klen};
  const float scale = 1.f / std::sqrt(float(M.Dh));
  for (int l = 0; l < M.L; ++l) {
    const LayerWeights& w = W.layers[size_t(l)];
    LayerActivations& A = a.layers[size_t(l)];
    // the row's q, k, v go into the key/value cache (row `row` of every sample)
    be_.matmul(A.qkv.data() + int64_t(row) * B * 3 * HD, x, w.qkv_w, B, 3 * HD, d, false, true);
    be_.rel_attention_forward(av, sized(row_prob_, int64_t(B) * M.H * klen), A.qkv.data(),
                              A.r.data() + int64_t(a.klen - klen) * HD, W.u, W.v, mask, shape,
                              scale);
    be_.matmul(ares, av, w.o_w, B, d, HD, false, true);
    be_.add_inplace(ares, x, int64_t(B) * d);
    be_.layernorm_forward(x, stats, stats + B, ares, w.ln1_w, w.ln1_b, B, d);  // x = h1
    be_.matmul(f1, x, w.ff1_w, B, di, d, false, true);
    be_.add_bias(f1, w.ff1_b, B, di);
    be_.relu_forward(f1, f1, int64_t(B) * di);
    be_.matmul(ares, f1, w.ff2_w, B, d, di, false, true);
    be_.add_bias(ares, w.ff2_b, B, d);
    be_.add_inplace(ares, x, int64_t(B) * d);
    be_.layernorm_forward(x, stats, stats + B, ares, w.ln2_w, w.ln2_b, B, d);
  }
  be_.matmul(logits, x, W.emb, B, V, d, false, true);
  be_.add_bias(logits, W.out_bias, B, V);
}

double Engine::forward(const int32_t* input, const int32_t* target, int B, int T,
                       const std::vector<int>& seg_len, int answer_size, bool training,
                       uint64_t dropout_seed, const Carry& carry) {
  const int N = int(seg_len.size());
  if (answer_size <= 0 || answer_size > T) fail("answer_size {} outside 1..{}", answer_size, T);
  seg_len_ = seg_len;
  training_ = training;
  batch_ = B;
  recomputing_ = recompute_;
  dropout_seed_ = dropout_seed;
  segs_.resize(recomputing_ ? 0 : size_t(N));
  seg_scored_.assign(size_t(N), 0);
  seg_outputs_.assign(size_t(N), SegmentOutputs{});
  seg_tokens_.resize(size_t(N));
  seg_targets_.resize(size_t(N));
  seg_logits_.resize(recomputing_ ? size_t(N) : 0);
  states_.resize(size_t(N) + 1);
  from_initial_ = carry.start == nullptr;
  if (from_initial_) {
    initial_state(states_[0], B);
  } else {
    const RecurrentState& st = *carry.start;
    const Model& M = model_;
    if (st.mem.size() != size_t(B) * M.m * M.d || st.mlen < 0 || st.mlen > M.mem_len ||
        st.cache.size() != size_t(M.mem_len > 0 ? M.L : 0))
      fail("forward: the start state does not fit this model and batch of {}", B);
    for (const auto& c : st.cache)
      if (c.size() != size_t(st.mlen) * B * M.d)
        fail("forward: the start state's cache does not fit this model and batch of {}", B);
    states_[0] = st;
  }
  const float loss_scale = 1.f / float(int64_t(B) * answer_size);
  loss_scale_ = loss_scale;
  double loss_sum = 0;
  int t0 = 0;
  for (int s = 0; s < N; ++s) {
    const int Ts = seg_len[size_t(s)];
    std::vector<int32_t>& tokens = seg_tokens_[size_t(s)];
    std::vector<int32_t>& targets = seg_targets_[size_t(s)];
    tokens.resize(size_t(B) * Ts);
    targets.resize(size_t(B) * Ts);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < Ts; ++t) {
        int pos = t0 + t;
        tokens[size_t(b) * Ts + t] = input[int64_t(b) * T + pos];
        targets[size_t(b) * Ts + t] = pos >= T - answer_size ? target[int64_t(b) * T + pos] : -1;
      }
    // Dead work in training: logits only where the loss scores a position, memory only where a
    // next segment reads it; the cache (xl) needs just the layer inputs. A segment that feeds
    // nothing is not run.
    const bool scored = t0 + Ts > T - answer_size;
    const bool passes_on = s + 1 < N || carry.pass_on;
    const bool cache_needed = model_.mem_len > 0 && passes_on;
    SegmentOutputs need{!training || scored, model_.m > 0 && (!training || passes_on)};
    seg_scored_[size_t(s)] = scored;
    seg_outputs_[size_t(s)] = need;
    t0 += Ts;
    if (!need.logits && !need.memory && !cache_needed) {
      states_[size_t(s) + 1] = states_[size_t(s)];
      continue;
    }
    SegmentActivations& a = recomputing_ ? work_ : segs_[size_t(s)];
    forward_segment(a, tokens.data(), targets.data(), B, Ts, states_[size_t(s)],
                    states_[size_t(s) + 1], training, mix_seed(dropout_seed, uint64_t(s)),
                    loss_scale, need);
    if (!need.logits) continue;
    for (int64_t i = 0; i < int64_t(B) * Ts; ++i) loss_sum += a.loss_rows[size_t(i)];
    if (recomputing_) seg_logits_[size_t(s)] = a.logits;
  }
  loss_ = loss_sum * loss_scale;
  return loss_;
}

const RecurrentState& Engine::state(int s) const {
  if (s < 0 || s >= int(states_.size())) fail("state({}): the last forward had {} segments", s, num_segments());
  return states_[size_t(s)];
}

const std::vector<float>& Engine::logits(int s) const {
  if (!seg_outputs_[size_t(s)].logits)
    fail("the logits of segment {} were not computed: no loss depends on them in training", s);
  return recomputing_ ? seg_logits_[size_t(s)] : segs_[size_t(s)].logits;
}

SegmentActivations& Engine::activations_for_backward(int s) {
  if (!recomputing_) return segs_[size_t(s)];
  // The same inputs, state, dropout seed and loss scale as in forward: the same activations.
  forward_segment(work_, seg_tokens_[size_t(s)].data(), seg_targets_[size_t(s)].data(), batch_,
                  seg_len_[size_t(s)], states_[size_t(s)], work_next_, training_,
                  mix_seed(dropout_seed_, uint64_t(s)), loss_scale_, seg_outputs_[size_t(s)]);
  return work_;
}

void Engine::backward_segment(SegmentActivations& a, bool with_loss, const float* dmem_out,
                              float* dmem_in) {
  Model& M = model_;
  const Weights& W = M.W;
  const Weights& G = M.G;
  const int B = a.B, T = a.T, q = a.q, mlen = a.mlen, klen = a.klen;
  const int d = M.d, HD = M.H * M.Dh, di = M.d_inner, V = M.V, m = M.m, m_write = a.m_write;
  const int64_t Bd = int64_t(B) * d, rows = int64_t(q) * B;
  const float p = dropout_p(training_);
  AttentionShape shape{B, M.H, M.Dh, q, klen};
  const float scale = 1.f / std::sqrt(float(M.Dh));
  const int64_t lo = int64_t(a.live_begin) * B, hi = int64_t(a.live_end) * B;

  // d(out): from the logits of the token rows and from the memory passed on (live rows only).
  float* dh = sized(dh_, rows * d);
  std::fill(dh, dh + rows * d, 0.f);
  if (with_loss) {
    be_.matmul(dh + m * Bd, a.dlogits.data(), W.emb, T * B, d, V, false, false);  // d(token rows)
    be_.matmul(G.emb, a.dlogits.data(), a.out.data() + m * Bd, V, d, T * B, true, false, 1.f, 1.f);
    be_.bias_backward(G.out_bias, a.dlogits.data(), T * B, V);
  }
  if (dmem_out) be_.add_inplace(dh + (m_write ? m + T : 0) * Bd, dmem_out, m * Bd);
  if (p > 0) be_.dropout_backward(dh + lo * d, dh + lo * d, a.keep_out.data() + lo * d, (hi - lo) * d, p);

  float* dx = sized(dx_, rows * d);
  float* dtmp = sized(dtmp_, rows * d);
  for (int l = M.L - 1; l >= 0; --l) {
    const LayerWeights& w = W.layers[size_t(l)];
    const LayerWeights& g = G.layers[size_t(l)];
    LayerActivations& A = a.layers[size_t(l)];
    // Rows past attention: the live ones in the last layer (the others have zero gradient).
    const int64_t o = l == M.L - 1 ? lo : 0, n64 = (l == M.L - 1 ? hi : rows) - o;
    const int n = int(n64);
    // LayerNorm 2: dh (w.r.t. h2) -> dx (w.r.t. c)
    be_.layernorm_backward(dx + o * d, g.ln2_w, g.ln2_b, dh + o * d, A.c.data() + o * d,
                           A.ln2_mean.data() + o, A.ln2_rstd.data() + o, w.ln2_w, n, d);
    // feed-forward: c = h1 + drop(W2 drop(relu(W1 h1 + b1)) + b2)
    const float* dff2 = dx + o * d;  // d(ff output) = d(c) through dropout
    if (p > 0) {
      be_.dropout_backward(dtmp + o * d, dx + o * d, A.keep_f2.data() + o * d, n64 * d, p);
      dff2 = dtmp + o * d;
    }
    be_.bias_backward(g.ff2_b, dff2, n, d);
    be_.matmul(g.ff2_w, dff2, (p > 0 ? A.f1_drop.data() : A.f1.data()) + o * di, d, di, n, true,
               false, 1.f, 1.f);
    float* dff = sized(dff_, rows * di) + o * di;
    be_.matmul(dff, dff2, w.ff2_w, n, di, d, false, false);
    if (p > 0) be_.dropout_backward(dff, dff, A.keep_f1.data() + o * di, n64 * di, p);
    be_.relu_backward(dff, dff, A.f1.data() + o * di, n64 * di);
    be_.bias_backward(g.ff1_b, dff, n, di);
    be_.matmul(g.ff1_w, dff, A.h1.data() + o * d, di, d, n, true, false, 1.f, 1.f);
    be_.matmul(dx + o * d, dff, w.ff1_w, n, d, di, false, false, 1.f, 1.f);  // dx = d(h1)
    // LayerNorm 1: d(h1) -> d(a), a = x + drop(o_net(av))
    be_.layernorm_backward(dh + o * d, g.ln1_w, g.ln1_b, dx + o * d, A.a.data() + o * d,
                           A.ln1_mean.data() + o, A.ln1_rstd.data() + o, w.ln1_w, n, d);  // dh = d(a)
    const float* dattn = dh + o * d;  // d(o_net output) through dropout
    if (p > 0) {
      be_.dropout_backward(dtmp + o * d, dh + o * d, A.keep_o.data() + o * d, n64 * d, p);
      dattn = dtmp + o * d;
    }
    be_.matmul(g.o_w, dattn, A.av.data() + o * HD, d, HD, n, true, false, 1.f, 1.f);
    float* dav = sized(dav_, rows * HD);  // rows past the live ones are not read
    be_.matmul(dav + o * HD, dattn, w.o_w, n, HD, d, false, false);
    // attention core
    shape.q_begin = l == M.L - 1 ? a.live_begin : 0;  // as in forward
    shape.q_end = l == M.L - 1 ? a.live_end : 0;
    float* dr = sized(dr_, int64_t(klen) * HD);
    std::fill(dr, dr + int64_t(klen) * HD, 0.f);
    float* dqkv = sized(dqkv_, int64_t(klen) * B * 3 * HD);
    be_.rel_attention_backward(dqkv, dr, G.u, G.v, dav, A.prob.data(), A.qkv.data(), A.r.data(),
                               W.u, W.v, shape, scale);
    be_.matmul(g.r_w, dr, a.pos.data(), HD, d, klen, true, false, 1.f, 1.f);
    // qkv weights: the current rows (q, k, v) and the cache rows (k, v only)
    const float* dqkv_cur = dqkv + int64_t(mlen) * B * 3 * HD;
    const float* x = l > 0 ? a.layers[size_t(l) - 1].h2.data() : a.h0.data();
    be_.matmul(g.qkv_w, dqkv_cur, x, 3 * HD, d, q * B, true, false, 1.f, 1.f);
    if (mlen > 0)
      be_.matmul_strided(g.qkv_w + int64_t(HD) * d, d, dqkv + HD, 3 * HD, A.cat.data(), d, 2 * HD,
                         d, mlen * B, true, false, 1.f, 1.f);
    // d(x) = d(a) (residual; zero past the live rows) + the current rows of d(qkv) W; the
    // cache rows are detached.
    if (n64 < rows) {
      std::fill(dh, dh + o * d, 0.f);
      std::fill(dh + (o + n64) * d, dh + rows * d, 0.f);
    }
    be_.matmul(dh, dqkv_cur, w.qkv_w, q * B, d, 3 * HD, false, false, 1.f, 1.f);
  }
  // dh = d(h0): dropout, then the token embedding and the memory rows.
  if (p > 0) be_.dropout_backward(dh, dh, a.keep_h0.data(), rows * d, p);
  be_.embedding_backward(G.emb, dh + m * Bd, a.ids.data(), T * B, d, std::sqrt(float(d)));
  if (dmem_in && m > 0) {
    std::copy_n(dh, m * Bd, dmem_in);
    if (m_write) be_.add_inplace(dmem_in, dh + (m + T) * Bd, m * Bd);
  }
}

void Engine::backward(int bptt) {
  Model& M = model_;
  std::fill(M.grads.begin(), M.grads.end(), 0.f);
  const int N = num_segments();
  if (N == 0) fail("backward() called before forward()");
  const int B = batch_;
  const int64_t mem_size = int64_t(B) * M.m * M.d;
  const size_t mem_n = size_t(mem_size);
  // The initial memory is the parameter broadcast over the batch: its gradient is the sum over
  // samples of d(memory) [m, B, d].
  auto to_param = [&](const std::vector<float>& dmem) {
    for (int i = 0; i < M.m; ++i)
      for (int b = 0; b < B; ++b)
        for (int k = 0; k < M.d; ++k)
          M.G.mem[int64_t(i) * M.d + k] += dmem[size_t((int64_t(i) * B + b) * M.d + k)];
  };

  if (M.m == 0) {  // no memory: segments are independent in backward (the cache is detached)
    for (int s = N - 1; s >= 0; --s)
      if (seg_scored_[size_t(s)]) backward_segment(activations_for_backward(s), true, nullptr, nullptr);
  } else if (bptt < 0) {  // through every segment: one stream
    dmem_in_.resize(mem_n);
    dmem_out_.resize(mem_n);
    for (int s = N - 1; s >= 0; --s) {
      // A carried start state is detached: nothing flows out of the first segment.
      const bool into_start = s > 0 || from_initial_;
      backward_segment(activations_for_backward(s), seg_scored_[size_t(s)] != 0,
                       s == N - 1 ? nullptr : dmem_out_.data(), into_start ? dmem_in_.data() : nullptr);
      std::swap(dmem_out_, dmem_in_);
    }
    if (from_initial_) to_param(dmem_out_);
  } else {
    // Truncated BPTT: a gradient stream from the loss of segment t may cross at most k segment
    // borders. Backward is linear, so streams of different ages go through a segment in
    // separate passes (their outputs must stay apart); parameter gradients add up. At segment
    // 0 every stream reaches the learned memory, so they merge into one pass.
    const int k = bptt;
    std::vector<std::vector<float>> arriving(size_t(k) + 1);  // by age (1..k)
    std::vector<float> out(mem_n);
    for (int s = N - 1; s >= 0; --s) {
      std::vector<std::vector<float>> leaving(size_t(k) + 1);
      SegmentActivations& a = activations_for_backward(s);
      if (s == 0) {
        std::vector<float> merged(size_t(mem_size), 0.f);
        bool any = false;
        for (int age = 1; age <= k; ++age)
          if (!arriving[size_t(age)].empty()) {
            any = true;
            for (int64_t i = 0; i < mem_size; ++i) merged[size_t(i)] += arriving[size_t(age)][size_t(i)];
          }
        backward_segment(a, seg_scored_[0] != 0, any ? merged.data() : nullptr,
                         from_initial_ ? out.data() : nullptr);
        if (from_initial_) to_param(out);
        break;
      }
      // age 0: this segment's own loss (none: the stream is zero, skip it)
      if (seg_scored_[size_t(s)]) {
        backward_segment(a, true, nullptr, k >= 1 ? out.data() : nullptr);
        if (k >= 1) leaving[1] = out;
      }
      for (int age = 1; age <= k; ++age) {
        if (arriving[size_t(age)].empty()) continue;
        bool continues = age + 1 <= k;
        backward_segment(a, false, arriving[size_t(age)].data(), continues ? out.data() : nullptr);
        if (continues) leaving[size_t(age) + 1] = out;
      }
      arriving.swap(leaving);
    }
  }
}

}  // namespace rmt
