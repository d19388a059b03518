// Backward of the models of docs/paper.md over the segments of a batch (the forward and the
// shapes' names: lib/core/engine.cpp). Through the segments in reverse, the memory's gradient
// handed from each segment to the one before it, as deep as bptt allows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "lib/core/engine.h"
#include "lib/core/assoc_memory.h"
#include "lib/core/error.h"
#include "lib/core/layer.h"
#include "lib/core/memory_tokens.h"
#include "lib/core/mixer.h"

namespace rmt {

namespace {

inline size_t fbytes(int64_t n) { return size_t(n) * sizeof(float); }

}  // namespace

int64_t Engine::memory_floats(int B) const {
  return memory_tokens_state_floats(model_, B) + assoc_state_floats(model_, B) +
         mixer_state_floats(model_, B);
}

SegmentActivations& Engine::activations_for_backward(int s) {
  if (!fwd_.recomputing) return fwd_.segs[size_t(s)];
  // The same inputs, state, dropout seed and loss scale as in forward: the same activations.
  run_segment(recomputed_.seg, fwd_.plans[size_t(s)], segment_ids(s), segment_targets(s), fwd_.batch, fwd_.states[size_t(s)],
              recomputed_.next, fwd_.training, segment_seed(s), fwd_.loss_scale);
  return recomputed_.seg;
}

void Engine::backward_segment(SegmentActivations& seg, bool with_loss, const float* dmem_out,
                              float* dmem_in) {
  Model& M = model_;
  const Weights& W = M.W;
  const Weights& G = M.G;
  const SegmentPlan& plan = seg.plan;
  const int B = seg.B, T = plan.T, q = plan.q;
  const int d = M.d, V = M.V, m = plan.m_read;  // token rows from m
  const int64_t Bd = int64_t(B) * d, rows = int64_t(q) * B;
  const float p = dropout_p(fwd_.training);
  const int64_t lo = int64_t(plan.live_begin) * B, hi = int64_t(plan.live_end) * B;

  backward_.size(be_, M, plan, B);
  // d(out): from the logits of the token rows and from the memory passed on (live rows only).
  float* dh = backward_.dh.data();
  be_.fill(dh, rows * d, 0.f);
  if (with_loss) {
    be_.matmul(dh + m * Bd, seg.dlogits.data(), W.emb, T * B, d, V, false, false);  // d(token rows)
    be_.matmul(G.emb, seg.dlogits.data(), seg.out.data() + m * Bd, V, d, T * B, true, false, 1.f, 1.f);
    be_.bias_backward(G.out_bias, seg.dlogits.data(), T * B, V);
  }
  memory_tokens_out_backward(be_, M, plan, dmem_out, dh, B);
  if (p > 0) be_.dropout_backward(dh + lo * d, dh + lo * d, seg.keep_out.data() + lo * d, (hi - lo) * d, p);
  // The state's gradient: the memory tokens' part, then the associative memory's, then the
  // mixers' (Engine::memory_floats).
  const int64_t tokens_floats = memory_tokens_state_floats(M, B);
  const float* dassoc_out = dmem_out ? dmem_out + tokens_floats : nullptr;
  float* dassoc_in = dmem_in ? dmem_in + tokens_floats : nullptr;
  const int64_t assoc_floats = assoc_state_floats(M, B);
  const float* dmixer_out = dassoc_out ? dassoc_out + assoc_floats : nullptr;
  float* dmixer_in = dassoc_in ? dassoc_in + assoc_floats : nullptr;
  assoc_backward_begin(be_, M, B, dassoc_out, dassoc_in);  // armt: d(A, z) in starts as d(A, z) out

  for (int l = M.L - 1; l >= 0; --l) {
    LayerActivations& act = seg.layers[size_t(l)];
    const LayerStep st = layer_step(seg, l, fwd_.training, nullptr);
    // armt: the memory this layer wrote, back into its output's write rows (and the entering memory)
    assoc_layer_write_backward(st, seg, act, dh, dassoc_out, dassoc_in, backward_);
    const float* x_prev = l > 0 ? seg.layers[size_t(l) - 1].h2.data() : seg.h0.data();
    const float* x = seg.assoc_read ? act.assoc.x_in.data() : x_prev;  // what the layer ran on
    layer_backward(st, act, x, dh, dmixer_out, dmixer_in, backward_);
    assoc_layer_read_backward(st, seg, act.assoc, dh, x_prev, dassoc_in, backward_);  // armt: d(x_in) -> d(x)
  }
  // dh = d(h0): dropout, then the token embedding and the memory rows.
  if (p > 0) be_.dropout_backward(dh, dh, seg.keep_h0.data(), rows * d, p);
  be_.embedding_backward(G.emb, dh + m * Bd, seg.token_ids, T * B, d, std::sqrt(float(d)));
  memory_tokens_in_backward(be_, M, plan, dh, dmem_in, B);
}

void Engine::backward(int bptt) {
  Model& M = model_;
  const int N = num_segments();
  if (N == 0) fail("backward() called before a forward (stage_forward and run_forward)");
  be_.fill(M.grads.data(), M.grads.size(), 0.f);
  const int B = fwd_.batch;
  const int64_t mem_size = memory_floats(B);
  // Whether a gradient leaves the first segment: where its memory is the learned parameter
  // broadcast over the batch (not a carried state, not armt's constant A = 0, z = 0, whose memory
  // tokens' gradient is summed inside every segment's backward instead).
  const bool to_start = fwd_.from_initial && memory_tokens_start_learned(M);
  auto to_param = [&](const DeviceArray<float>& dmem) {
    memory_tokens_initial_backward(be_, M, dmem.data(), B);
  };

  if (mem_size == 0) {  // no memory: segments are independent in backward (the cache is detached)
    for (int s = N - 1; s >= 0; --s)
      if (fwd_.plans[size_t(s)].backward) backward_segment(activations_for_backward(s), true, nullptr, nullptr);
  } else if (bptt < 0) {  // through every segment: one stream
    sized(dmem_.in, mem_size);
    sized(dmem_.out, mem_size);
    for (int s = N - 1; s >= 0; --s) {
      // A carried start state is detached: nothing flows out of the first segment.
      const bool into_start = s > 0 || to_start;
      backward_segment(activations_for_backward(s), fwd_.plans[size_t(s)].scored,
                       s == N - 1 ? nullptr : dmem_.out.data(), into_start ? dmem_.in.data() : nullptr);
      std::swap(dmem_.out, dmem_.in);
    }
    if (to_start) to_param(dmem_.out);
  } else {
    // Truncated BPTT: a gradient stream from the loss of segment t may cross at most k segment
    // borders. Backward is linear, so streams of different ages go through a segment in
    // separate passes (their outputs must stay apart); parameter gradients add up. At segment
    // 0 every stream reaches the learned memory, so they merge into one pass.
    const int k = bptt;
    dmem_.arriving.resize(size_t(k) + 1);  // by age (1..k)
    dmem_.leaving.resize(size_t(k) + 1);
    dmem_.arriving_set.assign(size_t(k) + 1, 0);
    DeviceArray<float>& out = dmem_.tbptt_out;
    sized(out, mem_size);
    // Hands one segment's memory gradient on as the stream of this age.
    auto leave = [&](int age) {
      be_.copy_device_to_device(sized(dmem_.leaving[size_t(age)], mem_size), out.data(),
                                fbytes(mem_size));
      dmem_.leaving_set[size_t(age)] = 1;
    };
    for (int s = N - 1; s >= 0; --s) {
      dmem_.leaving_set.assign(size_t(k) + 1, 0);
      SegmentActivations& seg = activations_for_backward(s);
      if (s == 0) {
        float* merged = sized(dmem_.merged, mem_size);
        be_.fill(merged, mem_size, 0.f);
        bool any = false;
        for (int age = 1; age <= k; ++age)
          if (dmem_.arriving_set[size_t(age)]) {
            any = true;
            be_.add_inplace(merged, dmem_.arriving[size_t(age)].data(), mem_size);
          }
        backward_segment(seg, fwd_.plans[0].scored, any ? merged : nullptr,
                         to_start ? out.data() : nullptr);
        if (to_start) to_param(out);
        break;
      }
      // age 0: this segment's own loss (none: the stream is zero, skip it)
      if (fwd_.plans[size_t(s)].scored) {
        backward_segment(seg, true, nullptr, k >= 1 ? out.data() : nullptr);
        if (k >= 1) leave(1);
      }
      for (int age = 1; age <= k; ++age) {
        if (!dmem_.arriving_set[size_t(age)]) continue;
        bool continues = age + 1 <= k;
        backward_segment(seg, false, dmem_.arriving[size_t(age)].data(),
                         continues ? out.data() : nullptr);
        if (continues) leave(age + 1);
      }
      dmem_.arriving.swap(dmem_.leaving);
      dmem_.arriving_set.swap(dmem_.leaving_set);
    }
  }
}

}  // namespace rmt
