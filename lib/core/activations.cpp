// The scratch structs' sizes (lib/core/activations.h), in the shapes' names of lib/core/engine.cpp.
#include "lib/core/activations.h"

#include "lib/core/assoc_memory.h"
#include "lib/core/delta_mixer.h"
#include "lib/core/model.h"

namespace rmt {

void BackwardScratch::size(Backend& be, const Model& M, const SegmentPlan& plan, int B) {
  const int64_t rows = int64_t(plan.q) * B, HD = int64_t(M.H) * M.Dh;
  dh.sized(be, rows * M.d);
  dx.sized(be, rows * M.d);
  dtmp.sized(be, rows * M.d);
  dff.sized(be, rows * M.d_inner);
  dav.sized(be, rows * HD);
  dqkv.sized(be, int64_t(plan.klen) * B * 3 * HD);
  dr.sized(be, int64_t(plan.klen) * HD);
  assoc_size_backward(be, M, plan, B, *this);  // the memory mechanisms' parts
  delta_size_backward(be, M, plan, B, *this);  // the delta-rule mixer's
}

void DecodeScratch::size(Backend& be, const Model& M, int B, int klen) {
  x.sized(be, int64_t(B) * M.d);
  av.sized(be, int64_t(B) * M.H * M.Dh);
  attn_res.sized(be, int64_t(B) * M.d);
  f.sized(be, int64_t(B) * M.d_inner);
  prob.sized(be, int64_t(B) * M.H * klen);
  stats.sized(be, 2 * int64_t(B));
  logits.sized(be, int64_t(B) * M.V);
  ids.sized(be, B);
  if (mask.size() < klen) mask.zeroed(be, klen);  // zero: nothing blocked
  assoc_size_decode(be, M, B, *this);
}

}  // namespace rmt
