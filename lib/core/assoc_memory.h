#pragma once
// ARMT's associative memory (docs/armt.md, the authors' AssociativeLayerWrapper) as one record:
// every layer l reads A_l, z_l before it at every row and writes them after it from the write
// block's output rows by the delta rule; A and z of every layer are the state that links the
// segments. Each function here does nothing for a kind without it (the kinds table's has_assoc),
// so the engine calls them at their places unconditionally. Shapes as lib/core/engine.cpp names
// them, plus
//   dm    model.d_mem        Dk  6 dm (DPFP's width)        F  Dk*d + Dk (A_b and z_b)
// Layer l's memory in a state: A_l = assoc + l*B*F [B, Dk, d], z_l = A_l + B*Dk*d [B, Dk].
#include <cstdint>
#include <string>

#include "lib/core/activations.h"
#include "lib/core/layer.h"
#include "lib/core/model.h"

namespace rmt {

// Its parameters in layer `prefix` (the authors' AssociativeLayerWrapper's names: W_mq, W_mk,
// W_mv, W_mb), and their places in a flat buffer.
void assoc_layer_params(const Model& M, const std::string& prefix, const AddParam& add);
void assoc_bind_layer(const Model& M, const std::string& prefix, const FindParam& at,
                      AssocWeights& w);

// Floats of the state's associative memory for B samples: L * B * F (0 without).
int64_t assoc_state_floats(const Model& M, int B);
// Fails where a forward would start from a carried state: A and z are not carried between
// forwards yet.
void assoc_check_start(const Model& M, const RecurrentState* start);

// The segment's start: whether it reads the entering state's memory (a segment has written it)
// and writes the next one (its memory is passed on: plan.memory_out); sizes next.assoc.
void assoc_begin_segment(Backend& be, const Model& M, SegmentActivations& seg,
                         const RecurrentState& state, RecurrentState& next);

// The read before layer st.l: its input x [q, B, d] plus what A_l gives for it, into a.x_in
// (returned); x when the segment reads nothing.
const float* assoc_layer_read(const LayerStep& st, const SegmentActivations& seg, AssocActivations& a,
                        const float* x);
// The write after it, when the segment writes: from the layer's output h2 [q, B, d] (its write
// block's rows) into layer st.l of next.assoc.
void assoc_layer_write(const LayerStep& st, const SegmentActivations& seg, AssocActivations& a,
                 const float* h2, RecurrentState& next);

// Backward, the same functions in reverse. dmem_out, dmem_in: the state's gradients leaving and
// entering the segment, at their assoc part (null: none / dropped).
// Before the layers: d(entering A, z) starts as d(leaving A, z) (the read and write add to it).
void assoc_backward_begin(Backend& be, const Model& M, int B, const float* dmem_out,
                          float* dmem_in);
// The write of layer st.l: into dh's write rows (d(h2), accumulated) and dmem_in.
void assoc_layer_write_backward(const LayerStep& st, const SegmentActivations& seg,
                          const LayerActivations& act, float* dh, const float* dmem_out,
                          float* dmem_in, BackwardScratch& s);
// The read: dx holds d(x_in) and becomes d(x) (x: the layer's input as read).
void assoc_layer_read_backward(const LayerStep& st, const SegmentActivations& seg,
                         const AssocActivations& a, float* dx, const float* x, float* dmem_in,
                         BackwardScratch& s);
// The read of one decoded row of every sample, x [B, d] in place (Engine::decode_token_row).
void assoc_decode_read(const LayerStep& st, const SegmentActivations& seg, float* x,
                       DecodeScratch& s);

// Its scratch: of a segment's backward, of a decoded row.
void assoc_size_backward(Backend& be, const Model& M, const SegmentPlan& plan, int B,
                         BackwardScratch& s);
void assoc_size_decode(Backend& be, const Model& M, int B, DecodeScratch& s);

}  // namespace rmt
