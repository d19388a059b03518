// Evaluation by diagonals of the (segment, layer) grid (Sivtsov et al. 2025, arXiv 2506.05229),
// for armt (docs/armt.md, "Diagonal evaluation").
//
// In armt a segment's memory tokens are the learned vectors again; what links segment s to s - 1
// is only each layer's A and z. So layer-step (s, l) needs (s, l - 1), its input rows, and
// (s - 1, l), which wrote A_l and z_l of the state entering s. The layer-steps with s + l = k
// (diagonal k) are then independent of each other, and the S x L grid runs as S + L - 1
// diagonals, each after the one before. A layer-step is run_layer, the body of run_segment's
// loop, on the same shapes: every number is the one segment-by-segment evaluation computes.
//
// Buffers, constant in the number of segments:
//   slot s % slots  segment s while it is in flight (diagonals s .. s + L - 1): its tokens, input
//                   rows, output and logits, and two LayerActivations used by parity of the layer
//                   (layer l reads layers[(l - 1) % 2].h2 and writes layers[l % 2]);
//   states[s % 2]   the state entering s. (s, l) reads layer l of states[s % 2] and writes layer l
//                   of states[(s + 1) % 2]; within a diagonal, (s + 1, l - 1) and (s - 1, l + 1)
//                   touch other layers of them, and layer l of states[(s + 1) % 2] was last read
//                   by (s - 1, l), one diagonal before.
// On the CPU the layer-steps of a diagonal run concurrently (run_cpu_tasks_concurrently), each on
// one thread. That is the sequential run's bits at any thread count because no CPU kernel's
// result depends on its threads: rmt's loops split independent items and sum in a fixed order,
// and oneDNN's sgemm gave the same bits on one thread as on two at every shape tested
// (tests/test_diagonal.cpp checks the whole evaluation against the sequential one at 1 and 2
// threads; rmt bench --diagonal at its own shape). With one thread, or on another backend, they run in turn.
#include <algorithm>

#include "lib/core/engine.h"
#include "lib/core/assoc_memory.h"
#include "lib/core/error.h"

namespace rmt {

void Engine::check_diagonal() const {
  const Model& M = model_;
  const ModelKindTraits& kt = traits_of(M.kind);
  if (!kt.has_assoc && !kt.has_mixer_state())
    fail("diagonal evaluation is for model.kind armt, deltanet and gated_deltanet only ({} passes "
         "its memory from the last layer of a segment to the first layer of the next, or has none: "
         "no two layer-steps are independent); evaluate it segment by segment (--schedule "
         "sequential)",
         M.config.kind);
  // A cache would make (s, l) read layer l's input rows of s - 1, the output of (s - 1, l - 1):
  // still an earlier diagonal, but not kept here. armt resolves mem_len to 0 (docs/armt.md).
  if (M.mem_len > 0)
    fail("diagonal evaluation with a Transformer-XL cache (model.mem_len {}) is not built", M.mem_len);
}

bool Engine::diagonal_overlaps() const { return &be_ == &cpu_backend() && num_threads() > 1; }

void Engine::forward_diagonal(int B, const std::vector<int>& seg_len, float loss_scale,
                              const std::function<DiagonalSegmentInput(int s)>& input,
                              const std::function<void(int s, const SegmentActivations& seg)>& done,
                              RecurrentState& after) {
  check_diagonal();
  const int L = model_.L, N = int(seg_len.size());
  if (N == 0) fail("forward_diagonal: no segments");
  const int slots = std::min(L, N);
  diagonal_.slots.resize(size_t(slots));
  for (SegmentActivations& slot : diagonal_.slots) slot.layers.resize(size_t(std::min(L, 2)));
  RecurrentState* states = diagonal_.states;
  initial_state(states[0], B);
  initial_state(states[1], B);
  // Sized once: a segment in flight keeps a pointer to the A and z it reads (seg.assoc_in).
  sized(states[0].assoc, assoc_state_floats(model_, B));
  sized(states[1].assoc, assoc_state_floats(model_, B));

  std::vector<const int32_t*> targets(size_t(slots), nullptr);  // each slot's, in the backend's memory
  for (int k = 0; k < N + L - 1; ++k) {
    // Segment k starts: its tokens uploaded, its input rows embedded (host-side state: in turn).
    if (k < N) {
      SegmentActivations& seg = diagonal_.slots[size_t(k % slots)];
      const DiagonalSegmentInput in = input(k);
      const int Ts = seg_len[size_t(k)];
      upload_segment(seg.ids, in.targets ? &seg.targets : nullptr, in.tokens, in.targets, B, Ts);
      targets[size_t(k % slots)] = in.targets ? seg.targets.data() : nullptr;
      const SegmentPlan plan = plan_segment(plan_model_, Ts, 0, false, in.outputs);
      begin_segment(seg, plan, seg.ids.data(), B, states[k % 2], states[(k + 1) % 2], false, nullptr);
      states[(k + 1) % 2].assoc_written = seg.assoc_write;
    }
    // The diagonal's layer-steps (s, k - s), independent of each other.
    const int s_first = std::max(0, k - L + 1), s_last = std::min(k, N - 1);
    run_independent(s_last - s_first + 1, [&](int i) {
      const int s = s_first + i, l = k - s;
      SegmentActivations& seg = diagonal_.slots[size_t(s % slots)];
      const float* x = l == 0 ? seg.h0.data() : seg.layers[size_t((l - 1) % 2)].h2.data();
      RecurrentState& next = states[(s + 1) % 2];
      x = run_layer(seg, seg.layers[size_t(l % 2)], l, x, states[s % 2], next, false, nullptr);
      if (l == L - 1 && seg.plan.live() > 0)
        end_segment(seg, x, targets[size_t(s % slots)], next, false, nullptr, loss_scale);
    });
    // Segment k - L + 1 has run its last layer: handed back, in segment order.
    if (k - L + 1 >= 0) done(k - L + 1, diagonal_.slots[size_t((k - L + 1) % slots)]);
  }
  std::swap(after, states[N % 2]);
}

void Engine::run_independent(int n, const std::function<void(int)>& task) {
  // The CPU backend is reentrant; a device's stream (or the guarded backend's page protection)
  // is not: there the layer-steps run in turn.
  if (diagonal_overlaps()) {
    run_cpu_tasks_concurrently(n, task);
    return;
  }
  for (int i = 0; i < n; ++i) task(i);
}

}  // namespace rmt
