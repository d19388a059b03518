#pragma once
// The memory tokens (docs/paper.md §2) as one record: m learned vectors in the read block at the
// segment's start and, with a write block, the same vectors at its end. Kinds that pass them on
// (rmt, mt, xl_rmt: the kinds table's carries_memory_tokens) hand the output of the write block
// (mt: the read block) to the next segment's read block, with gradients flowing back through
// it; armt's tokens are the learned vectors again in every segment (its memory is the
// associative one). Each function does nothing for a kind without them. Shapes as
// lib/core/engine.cpp names them; the state's memory is [m, B, d].
#include <cstdint>

#include "lib/core/activations.h"
#include "lib/core/model.h"

namespace rmt {

// Its parameter, the learned memory mem_tokens [m, 1, d] (the authors' name and shape), and its
// place in a flat buffer (Weights::mem, null without memory tokens).
void memory_tokens_params(const Model& M, const AddParam& add);
void memory_tokens_bind(const Model& M, const FindParam& at, Weights& w);

// Floats of the memory a state carries for B samples: m * B * d, 0 where nothing is carried.
int64_t memory_tokens_state_floats(const Model& M, int B);
// Whether the first segment's memory is the learned parameter broadcast over the batch (its
// gradient then reaches the parameter: memory_tokens_initial_backward).
bool memory_tokens_start_learned(const Model& M);

// The state before the first segment: the learned memory over the batch.
void memory_tokens_initial(Backend& be, const Model& M, RecurrentState& state, int B);
// Memory in: the read rows of h0 [q, B, d] (and the write rows, the same vectors): the state's
// memory, or the learned vectors where nothing is carried.
void memory_tokens_in(Backend& be, const Model& M, const SegmentPlan& plan,
                      const RecurrentState& state, float* h0, int B);
// Memory out: the last layer's output rows [mem_out_row, +m) of out into next.mem.
void memory_tokens_out(Backend& be, const Model& M, const SegmentPlan& plan, const float* out,
                       RecurrentState& next, int B);

// Backward. d(next memory) into the output rows it came from: dh [q, B, d] += dmem_out.
void memory_tokens_out_backward(Backend& be, const Model& M, const SegmentPlan& plan,
                                const float* dmem_out, float* dh, int B);
// d(h0) [q, B, d] back into d(state's memory) (null: dropped), or into the learned vectors.
void memory_tokens_in_backward(Backend& be, const Model& M, const SegmentPlan& plan,
                               const float* dh0, float* dmem_in, int B);
// d(initial memory) [m, B, d] into the parameter: the sum over samples.
void memory_tokens_initial_backward(Backend& be, const Model& M, const float* dmem, int B);

}  // namespace rmt
