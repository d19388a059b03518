#pragma once
// The token mixer of every kind today: Transformer-XL's relative multi-head softmax attention
// ("attn_type 0", docs/paper.md §2). Keys and values over [cache; x], queries from the current
// rows, then the output projection:
//   qkv = x W_qkv       r = pos W_r      av = attention(q, k, v, r; u, v, mask)     y = av W_o
// The state it carries from one segment to the next is the Transformer-XL cache: the last
// next_mlen rows of [cache; x] (detached). Its parameters: dec_attn.qkv_net, dec_attn.o_net,
// dec_attn.r_net of each layer and the shared r_w_bias (u), r_r_bias (v).
#include <string>

#include "lib/core/layer.h"

namespace rmt {

// Its parameters, in the authors' state_dict order: those every layer shares (r_w_bias = u,
// r_r_bias = v), and layer `prefix`'s (dec_attn.qkv_net, o_net, layer_norm, r_net; the authors'
// attention module holds the layer's first LayerNorm, so its names are the mixer's), and their
// places in a flat buffer.
void attention_shared_params(const Model& M, const AddParam& add);
void attention_layer_params(const Model& M, const std::string& prefix, const AddParam& add);
void attention_bind(const FindParam& at, Weights& w);
void attention_bind_layer(const std::string& prefix, const FindParam& at, LayerWeights& w);

// y [q, B, d] (sized here): rows [st.row_begin(), st.row_end()) of the mixer's output, after the
// next cache is handed on. Returns false, leaving y alone, for a last layer with no live rows.
bool attention_forward(const LayerStep& st, AttentionActivations& a, const float* x,
                       const float* cache, DeviceArray<float>* next_cache, DeviceArray<float>& y);

// Backward from dy (the live rows of d(y), at rows [row_begin, row_end)): parameter gradients
// into M.G, and d(x) added into dx [q, B, d]. x is the input the layer ran on. Reads every row
// of dy before it writes dx (dy may lie inside dx).
void attention_backward(const LayerStep& st, AttentionActivations& a, const float* x,
                        const float* dy, float* dx, BackwardScratch& s);

// One query row per sample at key row `row`: its q, k, v from x [B, d] into a.qkv's row `row`,
// attending over key rows [0, row]; y [B, d].
void attention_decode_row(const LayerStep& st, AttentionActivations& a, int row, const float* x,
                          float* y, DecodeScratch& s);

}  // namespace rmt
