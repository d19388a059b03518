#include "lib/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lib/error.h"
#include "lib/random.h"

namespace rmt {

namespace {

template <typename T>
T* sized(std::vector<T>& v, int64_t n) {  // resize without shrinking capacity
  v.resize(size_t(n));
  return v.data();
}

// Copy `rows` rows of width d from src (row stride src_stride) to dst (row stride dst_stride),
// for each of B samples (sample strides in rows: src_rows, dst_rows).
void copy_rows(float* dst, int dst_rows, int dst_off, const float* src, int src_rows,
               int src_off, int rows, int B, int d) {
  for (int b = 0; b < B; ++b)
    std::memcpy(dst + (int64_t(b) * dst_rows + dst_off) * d,
                src + (int64_t(b) * src_rows + src_off) * d, sizeof(float) * size_t(rows) * d);
}
void add_rows(float* dst, int dst_rows, int dst_off, const float* src, int src_rows, int src_off,
              int rows, int B, int d) {
  for (int b = 0; b < B; ++b) {
    float* y = dst + (int64_t(b) * dst_rows + dst_off) * d;
    const float* x = src + (int64_t(b) * src_rows + src_off) * d;
    for (int64_t i = 0; i < int64_t(rows) * d; ++i) y[i] += x[i];
  }
}

// The attention mask of FACTS.md section 2 (1 = blocked), keys [cache | read | tokens | write].
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
  state.mem.resize(size_t(B) * M.m * M.d);
  for (int b = 0; b < B; ++b)
    std::copy(M.W.mem, M.W.mem + int64_t(M.m) * M.d, state.mem.data() + int64_t(b) * M.m * M.d);
}

void Engine::forward_segment(SegmentActivations& a, const int32_t* tokens, const int32_t* targets,
                             int B, int T, const RecurrentState& state, RecurrentState& next,
                             bool training, uint64_t seed, float loss_scale, bool outputs) {
  Model& M = model_;
  const Weights& W = M.W;
  const int d = M.d, HD = M.H * M.Dh, di = M.d_inner, V = M.V, m = M.m;
  const int m_write = M.write_block ? m : 0;
  const int q = m + T + m_write, mlen = state.mlen, klen = q + mlen;
  const float p = dropout_p(training);
  a.B = B, a.T = T, a.q = q, a.mlen = mlen, a.klen = klen;

  std::copy(tokens, tokens + int64_t(B) * T, sized(a.tokens, int64_t(B) * T));
  if (targets) std::copy(targets, targets + int64_t(B) * T, sized(a.targets, int64_t(B) * T));
  build_mask(sized(a.mask, int64_t(q) * klen), q, mlen, m, m_write, M.config.read_mem_from_cache);

  // Input rows: [read memory | embedded tokens * sqrt(d) | write memory (same vectors)].
  float* h0 = sized(a.h0, int64_t(B) * q * d);
  float* tok = sized(a.tok, int64_t(B) * T * d);
  be_.embedding_forward(tok, a.tokens.data(), W.emb, B * T, d, std::sqrt(float(d)));
  copy_rows(h0, q, m, tok, T, 0, T, B, d);
  if (m > 0) {
    copy_rows(h0, q, 0, state.mem.data(), m, 0, m, B, d);
    if (m_write) copy_rows(h0, q, m + T, state.mem.data(), m, 0, m, B, d);
  }
  if (p > 0) be_.dropout_forward(h0, sized(a.keep_h0, int64_t(B) * q * d), int64_t(B) * q * d, p,
                                 mix_seed(seed, 1));
  float* pos = sized(a.pos, int64_t(klen) * d);
  be_.positional_embedding(pos, klen, d);
  if (p > 0) be_.dropout_forward(pos, sized(a.keep_pos, int64_t(klen) * d), int64_t(klen) * d, p,
                                 mix_seed(seed, 2));

  a.layers.resize(size_t(M.L));
  next.cache.assign(state.cache.size(), {});
  const int new_mlen = M.mem_len > 0 ? std::min(M.mem_len, klen) : 0;
  const AttentionShape shape{B, M.H, M.Dh, q, klen};
  const float scale = 1.f / std::sqrt(float(M.Dh));
  const float* x = h0;  // layer input [B, q, d]
  for (int l = 0; l < M.L; ++l) {
    const LayerWeights& w = W.layers[size_t(l)];
    LayerActivations& A = a.layers[size_t(l)];
    const int64_t rows = int64_t(B) * q;
    // [cache; x] -> q, k, v; only the current rows ask queries.
    float* cat = sized(A.cat, int64_t(B) * klen * d);
    if (mlen > 0) copy_rows(cat, klen, 0, state.cache[size_t(l)].data(), mlen, 0, mlen, B, d);
    copy_rows(cat, klen, mlen, x, q, 0, q, B, d);
    if (new_mlen > 0)  // the next cache: the last mem_len rows of [cache; x], detached
      copy_rows(sized(next.cache[size_t(l)], int64_t(B) * new_mlen * d), new_mlen, 0, cat, klen,
                klen - new_mlen, new_mlen, B, d);
    if (!outputs && l == M.L - 1) break;  // the next state has what it needs
    float* qkv = sized(A.qkv, int64_t(B) * klen * 3 * HD);
    be_.matmul(qkv, cat, w.qkv_w, B * klen, 3 * HD, d, false, true);
    float* r = sized(A.r, int64_t(klen) * HD);
    be_.matmul(r, pos, w.r_w, klen, HD, d, false, true);
    float* av = sized(A.av, rows * HD);
    be_.rel_attention_forward(av, sized(A.prob, int64_t(B) * M.H * q * klen), qkv, r, W.u, W.v,
                              a.mask.data(), shape, scale);
    // a = x + dropout(o_net(av)); h1 = LayerNorm(a)
    float* ares = sized(A.a, rows * d);
    be_.matmul(ares, av, w.o_w, int(rows), d, HD, false, true);
    if (p > 0) be_.dropout_forward(ares, sized(A.keep_o, rows * d), rows * d, p, mix_seed(seed, 3, l));
    be_.add_inplace(ares, x, rows * d);
    float* h1 = sized(A.h1, rows * d);
    be_.layernorm_forward(h1, sized(A.ln1_mean, rows), sized(A.ln1_rstd, rows), ares, w.ln1_w,
                          w.ln1_b, int(rows), d);
    // c = h1 + dropout(W2 dropout(relu(W1 h1 + b1)) + b2); h2 = LayerNorm(c)
    float* f1 = sized(A.f1, rows * di);
    be_.matmul(f1, h1, w.ff1_w, int(rows), di, d, false, true);
    be_.add_bias(f1, w.ff1_b, int(rows), di);
    be_.relu_forward(f1, f1, rows * di);
    const float* f1_used = f1;
    if (p > 0) {
      float* f1d = sized(A.f1_drop, rows * di);
      std::copy(f1, f1 + rows * di, f1d);
      be_.dropout_forward(f1d, sized(A.keep_f1, rows * di), rows * di, p, mix_seed(seed, 4, l));
      f1_used = f1d;
    }
    float* c = sized(A.c, rows * d);
    be_.matmul(c, f1_used, w.ff2_w, int(rows), d, di, false, true);
    be_.add_bias(c, w.ff2_b, int(rows), d);
    if (p > 0) be_.dropout_forward(c, sized(A.keep_f2, rows * d), rows * d, p, mix_seed(seed, 5, l));
    be_.add_inplace(c, h1, rows * d);
    float* h2 = sized(A.h2, rows * d);
    be_.layernorm_forward(h2, sized(A.ln2_mean, rows), sized(A.ln2_rstd, rows), c, w.ln2_w,
                          w.ln2_b, int(rows), d);
    x = h2;
  }
  next.mlen = new_mlen;
  if (!outputs) return;

  float* out = sized(a.out, int64_t(B) * q * d);
  std::copy(x, x + int64_t(B) * q * d, out);
  if (p > 0) be_.dropout_forward(out, sized(a.keep_out, int64_t(B) * q * d), int64_t(B) * q * d,
                                 p, mix_seed(seed, 6));
  // Logits of the token rows through the tied embedding.
  copy_rows(tok, T, 0, out, q, m, T, B, d);
  float* logits = sized(a.logits, int64_t(B) * T * V);
  be_.matmul(logits, tok, W.emb, B * T, V, d, false, true);
  be_.add_bias(logits, W.out_bias, B * T, V);
  if (targets) {
    be_.cross_entropy(sized(a.loss_rows, int64_t(B) * T),
                      sized(a.dlogits, int64_t(B) * T * V), logits,
                      a.targets.data(), B * T, V, loss_scale);
  }
  // The memory passed on: the write rows' output (rmt, xl_rmt) or the read rows' (mt).
  if (m > 0) copy_rows(sized(next.mem, int64_t(B) * m * d), m, 0, out, q, m_write ? m + T : 0, m, B, d);
}

void Engine::decode_token_row(SegmentActivations& a, int t, const int32_t* ids, float* logits) {
  Model& M = model_;
  const Weights& W = M.W;
  const int B = a.B, d = M.d, HD = M.H * M.Dh, di = M.d_inner, V = M.V;
  const int row = a.mlen + M.m + t;  // the token's row among the keys
  const int klen = row + 1;          // it attends to every key up to itself
  float* x = sized(row_x_, int64_t(B) * d);
  be_.embedding_forward(x, ids, W.emb, B, d, std::sqrt(float(d)));
  float* qkv = sized(row_qkv_, int64_t(B) * 3 * HD);
  float* av = sized(row_av_, int64_t(B) * HD);
  float* ares = sized(row_a_, int64_t(B) * d);
  float* f1 = sized(row_f_, int64_t(B) * di);
  float* stats = sized(row_stats_, 2 * int64_t(B));
  uint8_t* mask = sized(row_mask_, klen);
  std::fill(mask, mask + klen, uint8_t(0));
  // One query row, keys [0, klen) of the segment's qkv buffer (its rows are a.klen apart); the
  // position table is the segment's, shifted so that its last row is distance 0 from the query.
  const AttentionShape shape{B, M.H, M.Dh, 1, klen, a.klen};
  const float scale = 1.f / std::sqrt(float(M.Dh));
  for (int l = 0; l < M.L; ++l) {
    const LayerWeights& w = W.layers[size_t(l)];
    LayerActivations& A = a.layers[size_t(l)];
    be_.matmul(qkv, x, w.qkv_w, B, 3 * HD, d, false, true);
    for (int b = 0; b < B; ++b)
      std::copy_n(qkv + int64_t(b) * 3 * HD, 3 * HD, A.qkv.data() + (int64_t(b) * a.klen + row) * 3 * HD);
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
                       uint64_t dropout_seed) {
  const int N = int(seg_len.size());
  if (answer_size <= 0 || answer_size > T) fail("answer_size {} outside 1..{}", answer_size, T);
  seg_len_ = seg_len;
  training_ = training;
  batch_ = B;
  recomputing_ = recompute_;
  dropout_seed_ = dropout_seed;
  segs_.resize(recomputing_ ? 0 : size_t(N));
  seg_scored_.assign(size_t(N), 0);
  seg_run_.assign(size_t(N), 0);
  seg_outputs_.assign(size_t(N), 0);
  seg_tokens_.resize(size_t(N));
  seg_targets_.resize(size_t(N));
  seg_logits_.resize(recomputing_ ? size_t(N) : 0);
  states_.resize(size_t(N) + 1);
  initial_state(states_[0], B);
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
    // Dead work in training: without memory tokens a segment's output reaches the loss only
    // through its own scored positions; the cache (xl) needs just the layer inputs.
    const bool scored = t0 + Ts > T - answer_size;
    const bool cache_needed = model_.mem_len > 0 && s + 1 < N;
    const bool outputs = !training || scored || model_.m > 0;
    const bool run = outputs || cache_needed;
    seg_scored_[size_t(s)] = scored;
    seg_run_[size_t(s)] = run;
    seg_outputs_[size_t(s)] = outputs;
    t0 += Ts;
    if (!run) {
      states_[size_t(s) + 1] = states_[size_t(s)];
      continue;
    }
    SegmentActivations& a = recomputing_ ? work_ : segs_[size_t(s)];
    forward_segment(a, tokens.data(), targets.data(), B, Ts, states_[size_t(s)],
                    states_[size_t(s) + 1], training, mix_seed(dropout_seed, uint64_t(s)),
                    loss_scale, outputs);
    if (!outputs) continue;
    for (int64_t i = 0; i < int64_t(B) * Ts; ++i) loss_sum += a.loss_rows[size_t(i)];
    if (recomputing_) seg_logits_[size_t(s)] = a.logits;
  }
  loss_ = loss_sum * loss_scale;
  return loss_;
}

const std::vector<float>& Engine::logits(int s) const {
  if (!seg_outputs_[size_t(s)])
    fail("the logits of segment {} were not computed: no loss depends on them in training", s);
  return recomputing_ ? seg_logits_[size_t(s)] : segs_[size_t(s)].logits;
}

SegmentActivations& Engine::activations_for_backward(int s) {
  if (!recomputing_) return segs_[size_t(s)];
  // The same inputs, state, dropout seed and loss scale as in forward: the same activations.
  forward_segment(work_, seg_tokens_[size_t(s)].data(), seg_targets_[size_t(s)].data(), batch_,
                  seg_len_[size_t(s)], states_[size_t(s)], work_next_, training_,
                  mix_seed(dropout_seed_, uint64_t(s)), loss_scale_);
  return work_;
}

void Engine::backward_segment(SegmentActivations& a, bool with_loss, const float* dmem_out,
                              float* dmem_in) {
  Model& M = model_;
  const Weights& W = M.W;
  const Weights& G = M.G;
  const int B = a.B, T = a.T, q = a.q, mlen = a.mlen, klen = a.klen;
  const int d = M.d, HD = M.H * M.Dh, di = M.d_inner, V = M.V, m = M.m;
  const int m_write = M.write_block ? m : 0;
  const int64_t rows = int64_t(B) * q;
  const float p = dropout_p(training_);
  const AttentionShape shape{B, M.H, M.Dh, q, klen};
  const float scale = 1.f / std::sqrt(float(M.Dh));

  // d(out): from the logits of the token rows and from the memory passed on.
  float* dh = sized(dh_, rows * d);
  std::fill(dh, dh + rows * d, 0.f);
  float* dtmp = sized(dtmp_, rows * d);
  if (with_loss) {
    be_.matmul(dtmp, a.dlogits.data(), W.emb, B * T, d, V, false, false);         // dtok
    be_.matmul(G.emb, a.dlogits.data(), a.tok.data(), V, d, B * T, true, false, 1.f, 1.f);
    be_.bias_backward(G.out_bias, a.dlogits.data(), B * T, V);
    copy_rows(dh, q, m, dtmp, T, 0, T, B, d);
  }
  if (dmem_out) add_rows(dh, q, m_write ? m + T : 0, dmem_out, m, 0, m, B, d);
  if (p > 0) be_.dropout_backward(dh, a.keep_out.data(), rows * d, p);

  float* dx = sized(dx_, rows * d);
  for (int l = M.L - 1; l >= 0; --l) {
    const LayerWeights& w = W.layers[size_t(l)];
    const LayerWeights& g = G.layers[size_t(l)];
    LayerActivations& A = a.layers[size_t(l)];
    // LayerNorm 2: dh (w.r.t. h2) -> dx (w.r.t. c)
    be_.layernorm_backward(dx, g.ln2_w, g.ln2_b, dh, A.c.data(), A.ln2_mean.data(),
                           A.ln2_rstd.data(), w.ln2_w, int(rows), d);
    // feed-forward: c = h1 + drop(W2 drop(relu(W1 h1 + b1)) + b2)
    std::copy(dx, dx + rows * d, dtmp);
    if (p > 0) be_.dropout_backward(dtmp, A.keep_f2.data(), rows * d, p);
    be_.bias_backward(g.ff2_b, dtmp, int(rows), d);
    be_.matmul(g.ff2_w, dtmp, p > 0 ? A.f1_drop.data() : A.f1.data(), d, di, int(rows), true,
               false, 1.f, 1.f);
    float* dff = sized(dff_, rows * di);
    be_.matmul(dff, dtmp, w.ff2_w, int(rows), di, d, false, false);
    if (p > 0) be_.dropout_backward(dff, A.keep_f1.data(), rows * di, p);
    be_.relu_backward(dff, dff, A.f1.data(), rows * di);
    be_.bias_backward(g.ff1_b, dff, int(rows), di);
    be_.matmul(g.ff1_w, dff, A.h1.data(), di, d, int(rows), true, false, 1.f, 1.f);
    be_.matmul(dx, dff, w.ff1_w, int(rows), d, di, false, false, 1.f, 1.f);  // dx = d(h1)
    // LayerNorm 1: d(h1) -> d(a), a = x + drop(o_net(av))
    be_.layernorm_backward(dh, g.ln1_w, g.ln1_b, dx, A.a.data(), A.ln1_mean.data(),
                           A.ln1_rstd.data(), w.ln1_w, int(rows), d);  // dh = d(a)
    std::copy(dh, dh + rows * d, dtmp);
    if (p > 0) be_.dropout_backward(dtmp, A.keep_o.data(), rows * d, p);
    be_.matmul(g.o_w, dtmp, A.av.data(), d, HD, int(rows), true, false, 1.f, 1.f);
    float* dav = sized(dav_, rows * HD);
    be_.matmul(dav, dtmp, w.o_w, int(rows), HD, d, false, false);
    // attention core
    float* dqkv = sized(dqkv_, int64_t(B) * klen * 3 * HD);
    float* dr = sized(dr_, int64_t(klen) * HD);
    std::fill(dr, dr + int64_t(klen) * HD, 0.f);
    be_.rel_attention_backward(dqkv, dr, G.u, G.v, dav, A.prob.data(), A.qkv.data(),
                               A.r.data(), W.u, W.v, shape, scale);
    be_.matmul(g.r_w, dr, a.pos.data(), HD, d, klen, true, false, 1.f, 1.f);
    be_.matmul(g.qkv_w, dqkv, A.cat.data(), 3 * HD, d, B * klen, true, false, 1.f, 1.f);
    float* dcat = sized(dcat_, int64_t(B) * klen * d);
    be_.matmul(dcat, dqkv, w.qkv_w, B * klen, d, 3 * HD, false, false);
    // d(x) = d(a) (residual) + d(cat) of the current rows; the cache rows are detached.
    add_rows(dh, q, 0, dcat, klen, mlen, q, B, d);
  }
  // dh = d(h0): dropout, then the token embedding and the memory rows.
  if (p > 0) be_.dropout_backward(dh, a.keep_h0.data(), rows * d, p);
  copy_rows(dtmp, T, 0, dh, q, m, T, B, d);
  be_.embedding_backward(G.emb, dtmp, a.tokens.data(), B * T, d, std::sqrt(float(d)));
  if (dmem_in && m > 0) {
    copy_rows(dmem_in, m, 0, dh, q, 0, m, B, d);
    if (m_write) add_rows(dmem_in, m, 0, dh, q, m + T, m, B, d);
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
  // The initial memory is the parameter broadcast over the batch: its gradient is the sum.
  auto to_param = [&](const std::vector<float>& dmem) {
    for (int b = 0; b < B; ++b)
      for (int64_t i = 0; i < int64_t(M.m) * M.d; ++i)
        M.G.mem[i] += dmem[size_t(b * int64_t(M.m) * M.d + i)];
  };

  if (M.m == 0) {  // no memory: segments are independent in backward (the cache is detached)
    for (int s = N - 1; s >= 0; --s)
      if (seg_scored_[size_t(s)]) backward_segment(activations_for_backward(s), true, nullptr, nullptr);
  } else if (bptt < 0) {  // through every segment: one stream
    dmem_in_.resize(mem_n);
    dmem_out_.resize(mem_n);
    for (int s = N - 1; s >= 0; --s) {
      backward_segment(activations_for_backward(s), seg_scored_[size_t(s)] != 0,
                       s == N - 1 ? nullptr : dmem_out_.data(), dmem_in_.data());
      std::swap(dmem_out_, dmem_in_);
    }
    to_param(dmem_out_);
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
        backward_segment(a, seg_scored_[0] != 0, any ? merged.data() : nullptr, out.data());
        to_param(out);
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
