// The memory tokens (lib/core/memory_tokens.h); shapes as lib/core/engine.cpp names them.
#include "lib/core/memory_tokens.h"

namespace rmt {

namespace {

inline size_t fbytes(int64_t n) { return size_t(n) * sizeof(float); }

bool carried(const Model& M) { return traits_of(M.kind).carries_memory_tokens(); }

}  // namespace

void memory_tokens_params(const Model& M, const AddParam& add) {
  if (M.num_mem > 0) add("mem_tokens", {M.num_mem, 1, M.d});
}

void memory_tokens_bind(const Model& M, const FindParam& at, Weights& w) {
  w.mem = M.num_mem > 0 ? at("mem_tokens") : nullptr;
}

int64_t memory_tokens_state_floats(const Model& M, int B) {
  return carried(M) ? int64_t(B) * M.num_mem * M.d : 0;
}

bool memory_tokens_start_learned(const Model& M) { return carried(M); }

void memory_tokens_initial(Backend& be, const Model& M, RecurrentState& state, int B) {
  if (M.num_mem > 0 && !carried(M)) return;  // armt: its tokens carry nothing (memory_tokens_in)
  float* mem = state.mem.sized(be, int64_t(B) * M.num_mem * M.d);  // memory row i of every sample
  if (M.num_mem > 0) be.broadcast_batch(mem, M.W.mem, M.num_mem, B, M.d);
}

void memory_tokens_in(Backend& be, const Model& M, const SegmentPlan& plan,
                      const RecurrentState& state, float* h0, int B) {
  const int64_t Bd = int64_t(B) * M.d;
  if (!carried(M)) {  // armt: the learned vectors in the write rows, the same in every segment
    if (M.num_mem > 0 && plan.m_write)
      be.broadcast_batch(h0 + plan.mem_out_row * Bd, M.W.mem, M.num_mem, B, M.d);
    return;
  }
  const int m = plan.m_read;
  be.copy_device_to_device(h0, state.mem.data(), fbytes(m * Bd));
  if (plan.m_write) be.copy_device_to_device(h0 + (m + plan.T) * Bd, state.mem.data(), fbytes(m * Bd));
}

void memory_tokens_out(Backend& be, const Model& M, const SegmentPlan& plan, const float* out,
                       RecurrentState& next, int B) {
  if (!plan.memory_out || !carried(M)) return;
  // rmt, xl_rmt: the write block; mt: the read block
  const int64_t Bd = int64_t(B) * M.d, n = plan.m_read * Bd;
  be.copy_device_to_device(next.mem.sized(be, n), out + plan.mem_out_row * Bd, fbytes(n));
}

void memory_tokens_out_backward(Backend& be, const Model& M, const SegmentPlan& plan,
                                const float* dmem_out, float* dh, int B) {
  if (!dmem_out || !carried(M)) return;
  const int64_t Bd = int64_t(B) * M.d;
  be.add_inplace(dh + plan.mem_out_row * Bd, dmem_out, plan.m_read * Bd);
}

void memory_tokens_in_backward(Backend& be, const Model& M, const SegmentPlan& plan,
                               const float* dh0, float* dmem_in, int B) {
  const int64_t Bd = int64_t(B) * M.d;
  if (!carried(M)) {  // armt: the learned vectors of the write rows, new in every segment
    if (M.num_mem > 0 && plan.m_write)
      be.broadcast_batch_backward(M.G.mem, dh0 + plan.mem_out_row * Bd, M.num_mem, B, M.d);
    return;
  }
  // d(memory in) [m, B, d] = d(read rows) + d(write rows) of d(h0)
  const int m = plan.m_read;
  if (!dmem_in || m == 0) return;
  be.copy_device_to_device(dmem_in, dh0, fbytes(m * Bd));
  if (plan.m_write) be.add_inplace(dmem_in, dh0 + (m + plan.T) * Bd, m * Bd);
}

void memory_tokens_initial_backward(Backend& be, const Model& M, const float* dmem, int B) {
  be.broadcast_batch_backward(M.G.mem, dmem, M.num_mem, B, M.d);
}

}  // namespace rmt
