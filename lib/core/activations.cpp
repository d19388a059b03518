// The scratch structs' sizes (lib/core/activations.h), in the shapes' names of lib/core/engine.cpp.
#include "lib/core/activations.h"

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
  if (M.d_key == 0) return;
  const int64_t mrows = int64_t(M.num_mem) * B;
  dassoc_drop.sized(be, int64_t(B) * M.assoc_floats());
  dphi.sized(be, rows * M.d_key);
  dproj.sized(be, rows * M.d_mem);
  dwv.sized(be, mrows * M.d);
  dwb.sized(be, mrows);
  dwbar.sized(be, mrows * M.d);
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
  if (M.d_key == 0) return;
  q.sized(be, int64_t(B) * M.d_mem);
  phi.sized(be, int64_t(B) * M.d_key);
  read.sized(be, int64_t(B) * M.d);
  den.sized(be, B);
}

}  // namespace rmt
