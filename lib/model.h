#pragma once
// The model: one Transformer-XL backbone (relative positions, post-LayerNorm, tied output
// embedding) used five ways (FACTS.md section 2):
//   baseline  segments processed independently
//   xl        + a detached cache of each layer's last mem_len input rows (Transformer-XL)
//   rmt       + m memory tokens: input [read m; tokens; write m]; the write rows' output is the
//             next segment's memory, with gradients flowing back through it (BPTT)
//   mt        + m memory tokens at the start only; the read rows' output is passed on
//   xl_rmt    both cache and memory
// Parameters, gradients and Adam moments each live in one contiguous allocation; ParamInfo
// names every tensor as the authors' PyTorch state_dict does.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/backend.h"
#include "lib/config.h"

namespace rmt {

enum class ModelKind { baseline, xl, rmt, mt, xl_rmt };
ModelKind parse_model_kind(const std::string& kind);

struct ParamInfo {
  std::string name;             // authors' state_dict name
  std::vector<int64_t> shape;   // authors' shape
  int64_t offset = 0, numel = 0;
};

// Pointers to each tensor inside one flat buffer (parameters or gradients share the layout).
struct LayerWeights {
  float *qkv_w;         // [3*H*Dh, d]
  float *r_w;           // [H*Dh, d]
  float *o_w;           // [d, H*Dh]
  float *ln1_w, *ln1_b; // [d]
  float *ff1_w, *ff1_b; // [d_inner, d], [d_inner]
  float *ff2_w, *ff2_b; // [d, d_inner], [d]
  float *ln2_w, *ln2_b; // [d]
};
struct Weights {
  float* emb;       // [V, d] token embedding, tied to the output layer
  float* out_bias;  // [V]
  float *u, *v;     // [H, Dh] r_w_bias, r_r_bias (shared by all layers)
  float* mem;       // [m, d] initial memory (null without memory tokens)
  std::vector<LayerWeights> layers;
};

struct Model {
  explicit Model(const ModelConfig& config);  // config.n_token must be set
  ModelConfig config;
  ModelKind kind;
  int V, L, H, Dh, d, d_inner;
  int mem_len;       // cache rows (xl, xl_rmt), else 0
  int m;             // memory tokens (rmt, mt, xl_rmt), else 0
  bool write_block;  // memory also at the end (rmt, xl_rmt)

  std::vector<ParamInfo> param_info;
  std::vector<float> params, grads;
  Weights W, G;      // views into params and grads

  int64_t num_params() const { return int64_t(params.size()); }
  // The original's initialisation: weights N(0, 0.02), biases 0, LayerNorm weights N(1, 0.02),
  // u and v N(0, 0.02); the memory is one N(0, 1) vector repeated m times (as the authors'
  // init_mem_tokens does), or N(0, 0.02) entries with config.mem_init = "normal".
  void init_weights(uint64_t seed);
  const ParamInfo* find(const std::string& name) const;
};

// The number of parameters a Model of this config has, computed without building it (as a
// double: a config with absurd sizes must not overflow before it is refused).
double model_param_count(const ModelConfig& config);

// Splits T positions into n segments as evenly as possible, the longer ones first.
std::vector<int> segment_lengths(int T, int n);
// "24,24,24" or "25,25,24 (uneven)"
std::string describe_segments(const std::vector<int>& lengths);

}  // namespace rmt
