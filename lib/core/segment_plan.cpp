#include "lib/core/segment_plan.h"

#include <algorithm>

#include "lib/core/model_kind.h"

namespace rmt {

SegmentModel segment_model(const ModelConfig& c) {
  const ModelKindTraits& kt = traits_of(c.kind);
  return {kt.has_memory ? c.num_mem_tokens : 0, kt.has_cache ? c.mem_len : 0, kt.has_write_block,
          kt.has_read_block, kt.has_mixer_state()};
}

SegmentPlan plan_segment(const SegmentModel& model, int T, int mlen, bool training,
                         SegmentOutputs outputs) {
  const int m = model.num_mem;
  SegmentPlan p;
  const int m_read = model.read_block ? m : 0;
  p.T = T, p.m_read = m_read, p.mlen = mlen;
  p.logits = outputs.logits;
  p.memory_out = (m > 0 || model.mixer_state) && outputs.memory;
  // No other row attends to the write block (docs/paper.md mask): it only makes the memory passed
  // on. A training segment whose memory nothing reads (the last) runs without it.
  p.m_write = model.write_block && (p.memory_out || !training) ? m : 0;
  p.q = m_read + T + p.m_write;
  p.klen = mlen + p.q;
  p.mem_out_row = p.m_write ? m_read + T : 0;
  p.cache_out = model.mem_len > 0;
  p.next_mlen = model.mem_len > 0 ? std::min(model.mem_len, p.klen) : 0;
  p.backward = p.memory_out;  // plan_forward adds the scored ones
  // Live rows: the smallest range holding every row whose output something reads.
  int begin = p.q, end = 0;
  auto live = [&](int b, int e) { begin = std::min(begin, b), end = std::max(end, e); };
  if (!training) live(0, p.q);
  if (p.logits) live(m_read, m_read + T);
  if (p.memory_out && m > 0) live(p.mem_out_row, p.mem_out_row + m);
  if (begin < end) p.live_begin = begin, p.live_end = end;
  return p;
}

void plan_forward(std::vector<SegmentPlan>& plans, const SegmentModel& model,
                  const std::vector<int>& seg_len, int first_scored, bool training, bool pass_on,
                  int start_mlen) {
  const int N = int(seg_len.size());
  plans.resize(size_t(N));
  int t0 = 0, mlen = start_mlen;
  for (int s = 0; s < N; ++s) {
    const int T = seg_len[size_t(s)];
    // Dead work in training: logits only where the loss scores a position, memory only where a
    // next segment reads it; the cache (xl) needs just the layer inputs.
    const bool scored = t0 + T > first_scored;
    const bool passes_on = s + 1 < N || pass_on;
    SegmentPlan& p = plans[size_t(s)];
    p = plan_segment(model, T, mlen, training, {!training || scored, !training || passes_on});
    p.scored = scored;
    p.backward = p.backward || scored;
    p.cache_out = model.mem_len > 0 && passes_on;
    p.run = p.logits || p.memory_out || p.cache_out;
    if (!p.run) p.next_mlen = mlen;  // the state goes on unchanged
    mlen = p.next_mlen;
    t0 += T;
  }
}

std::vector<SegmentPlan> plan_forward(const SegmentModel& model, const std::vector<int>& seg_len,
                                      int first_scored, bool training, bool pass_on,
                                      int start_mlen) {
  std::vector<SegmentPlan> plans;
  plan_forward(plans, model, seg_len, first_scored, training, pass_on, start_mlen);
  return plans;
}

SegmentPlan plan_largest_segment(const SegmentModel& model, int T) {
  return plan_segment(model, T, model.mem_len, false, SegmentOutputs{});
}

}  // namespace rmt
