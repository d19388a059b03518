#pragma once
// The model: one Transformer-XL backbone (relative positions, post-LayerNorm, tied output
// embedding) used five ways (docs/paper.md §2):
//   baseline  segments processed independently
//   xl        + a detached cache of each layer's last mem_len input rows (Transformer-XL)
//   rmt       + m memory tokens: input [read m; tokens; write m]; the write rows' output is the
//             next segment's memory, with gradients flowing back through it (BPTT)
//   mt        + m memory tokens at the start only; the read rows' output is passed on
//   xl_rmt    both cache and memory
//   armt      + m memory tokens at the end of every segment, learned vectors each time; every
//             layer reads an associative memory (A, z) before it and writes it after it from
//             the memory rows' output (docs/armt.md); A and z link the segments (BPTT)
// Parameters, gradients and Adam moments each live in one contiguous allocation of the
// backend's memory (the host reads and writes them through upload / download); ParamInfo names
// every tensor as the authors' PyTorch state_dict does.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "lib/core/model_config.h"
#include "lib/core/model_kind.h"
#include "lib/core/system.h"  // the machine and the process that the estimates here are held against

namespace rmt {

struct ParamInfo {
  std::string name;             // authors' state_dict name
  std::vector<int64_t> shape;   // authors' shape
  int64_t offset = 0, numel = 0;
  bool decays = true;           // AdamW's weight decay applies (decays_by_name; docs/training.md)
};

// Whether train.weight_decay applies to tensor `name`: mad-lab's rule (no "bias" and no "norm"
// in the name) and fla's _no_weight_decay mark of A_log (docs/training.md, "Weight decay").
bool decays_by_name(const std::string& name);
// The parameters' [offset, offset + n) ranges that decay, contiguous tensors merged.
struct ParamRange {
  int64_t offset = 0, n = 0;
};
std::vector<ParamRange> decaying_ranges(const std::vector<ParamInfo>& layout);

// Each part of the model declares its own tensors: the token mixer (lib/core/attention.h), the
// memory mechanisms (lib/core/memory_tokens.h, lib/core/assoc_memory.h) and the backbone here.
// AddParam declares one, in the layout's order; FindParam gives a declared tensor's place in a
// flat buffer (parameters or gradients), by name.
using AddParam = std::function<void(const std::string& name, std::vector<int64_t> shape)>;
using FindParam = std::function<float*(const std::string& name)>;

// Pointers to each tensor inside one flat buffer (parameters or gradients share the layout), in
// the backend's memory: handed to kernels, never dereferenced by the host.
struct AttentionWeights {  // the token mixer's (lib/core/attention.h)
  float* qkv_w = nullptr;  // [3*H*Dh, d]
  float* r_w = nullptr;    // [H*Dh, d]
  float* o_w = nullptr;    // [d, H*Dh]
};
// The delta-rule mixer's (lib/core/delta_mixer.h, fla's names in comments; null where the kind
// lacks it): HK = H*Dk key columns, HV = H*Dv value columns, W the convolution's width.
struct DeltaWeights {
  float *A_log = nullptr, *dt_bias = nullptr;         // [H] the decay's (gated_deltanet)
  float *q_w = nullptr, *k_w = nullptr;               // [HK, d] q_proj, k_proj
  float* v_w = nullptr;                               // [HV, d] v_proj
  float* a_w = nullptr;                               // [H, d]  a_proj (gated_deltanet)
  float* b_w = nullptr;                               // [H, d]  b_proj (beta's)
  float *q_conv = nullptr, *k_conv = nullptr;         // [HK, W] q_conv1d, k_conv1d (W > 0)
  float* v_conv = nullptr;                            // [HV, W] v_conv1d
  float* g_w = nullptr;                               // [HV, d] g_proj, the output gate (gated_deltanet)
  float* o_norm = nullptr;                            // [Dv]    o_norm
  float* o_w = nullptr;                               // [d, HV] o_proj
};
// armt's associative memory (null otherwise; docs/armt.md): queries and keys d -> d_mem,
// values d -> d (starting at zero), the write strength beta d -> 1 with a bias.
struct AssocWeights {
  float *mq_w = nullptr, *mk_w = nullptr;  // [d_mem, d]
  float* mv_w = nullptr;                   // [d, d]
  float *mb_w = nullptr, *mb_b = nullptr;  // [1, d], [1]
};
struct LayerWeights {
  AttentionWeights attn;  // the layer's mixer: attention's or the delta rule's
  DeltaWeights delta;
  float *ln1_w, *ln1_b; // [d]
  float *ff1_w, *ff1_b; // [d_inner, d], [d_inner]
  float *ff2_w, *ff2_b; // [d, d_inner], [d]
  float *ln2_w, *ln2_b; // [d]
  AssocWeights assoc;
};
struct Weights {
  float* emb;       // [V, d] token embedding, tied to the output layer
  float* out_bias;  // [V]
  float *u = nullptr, *v = nullptr;  // [H, Dh] r_w_bias, r_r_bias (attention's, shared by all layers)
  float* mem;       // [num_mem, d] initial memory (null without memory tokens)
  std::vector<LayerWeights> layers;
};

struct Model {
  // config.n_token must be set. Parameters and gradients are allocated on `backend` (zero).
  explicit Model(const ModelConfig& config, Backend& backend = cpu_backend());
  Model(const Model&) = delete;  // W and G point into params and grads
  Model& operator=(const Model&) = delete;
  ModelConfig config;
  Backend& backend;
  ModelKind kind;
  int V, L, H, Dh, d, d_inner;
  int mem_len;       // cache rows (xl, xl_rmt), else 0
  int num_mem;       // memory tokens (rmt, mt, xl_rmt, armt), else 0
  bool write_block;  // memory also at the end (rmt, xl_rmt, armt)
  bool read_block;   // memory at the start (rmt, mt, xl_rmt)
  // armt: d_mem, and the associative memory's key width Dk = 6 d_mem (else 0)
  int d_mem = 0, d_key = 0;
  // Floats of the associative state of one sample in one layer: A [Dk, d] and z [Dk] (else 0)
  int64_t assoc_floats() const { return int64_t(d_key) * d + d_key; }
  // deltanet, gated_deltanet: Dh key and Dv = expand_v Dh value columns per head, the
  // convolution's width (0: none) (else 0)
  int Dv = 0, conv = 0;
  int wy_chunk = 0;  // model.delta_chunk: the chunked form's rows per chunk (0: the recurrence)

  std::vector<ParamInfo> param_info;
  DeviceArray<float> params, grads;  // [num_params()] each, in param_info's layout
  Weights W, G;      // views into params and grads

  int64_t num_params() const { return params.size(); }
  // The original's initialisation: weights N(0, 0.02), biases 0, LayerNorm weights N(1, 0.02),
  // u and v N(0, 0.02); the memory is one N(0, 1) vector repeated m times (as the authors'
  // init_mem_tokens does), or N(0, 0.02) entries with config.mem_init = "normal". armt's W_mv
  // starts at zero (as the authors' AssociativeLayerWrapper), so a new model reads nothing.
  void init_weights(uint64_t seed);
  const ParamInfo* find(const std::string& name) const;
};

// The number of parameters a Model of this config has, computed without building it (as a
// double: a config with absurd sizes must not overflow before it is refused).
double model_param_count(const ModelConfig& config);

// model.expand_v of a delta-rule kind, its 0 resolved to the kind's default (fla's layers: 1 for
// DeltaNet, 2 for Gated DeltaNet); 0 for the other kinds.
int resolved_expand_v(const ModelConfig& config);

// ---- Resources a run needs, checked before anything large is allocated ----

// What a workload keeps in memory besides the model: the batch, its segments, and whether it
// trains (gradients, Adam moments, backward scratch) and how (bptt_recompute).
struct Workload {
  int batch = 1;
  std::vector<int> seg_len;      // segment lengths of one input row
  bool training = false;         // forward + backward + Adam (else: evaluation forwards)
  bool recompute = false;        // bptt_recompute: one segment's activations at a time
  bool decoding = false;         // greedy decoding too (evaluation)
  double data_bytes = 0;         // dataset arrays held (and read) at the same time
};
// An estimate of a process's peak resident memory, in bytes, by part.
struct MemoryEstimate {
  double weights = 0;      // parameters and their gradients (allocated together)
  double optimizer = 0;    // Adam's two moments
  double activations = 0;  // saved activations, states, logits and backward scratch
  double data = 0;         // the dataset
  double runtime = 0;      // the program, its libraries and thread stacks
  bool training = false;   // of a training step (Workload::training): what may be reduced differs
  double total() const { return weights + optimizer + activations + data + runtime; }
  std::string describe() const;  // "1.2 GB (weights 10 MB, Adam 20 MB, activations ...)"
};
MemoryEstimate estimate_memory(const ModelConfig& config, const Workload& workload);
// The memory this process could still use: MemAvailable from /proc/meminfo, lowered by a
// cgroup (v2 or v1) limit and by RLIMIT_AS / RLIMIT_DATA where they are set. `source` says
// which bound it is.
double available_memory_bytes(std::string* source = nullptr);
// Fails, naming `what`, the estimate by part and what is available, when the estimate does
// not fit; the hint says what to reduce (bptt_recompute only for a training step).
void check_memory_fits(const MemoryEstimate& estimate, const std::string& what);

// Thread counts: 0 = all cores, else 1..kMaxThreads; fails naming `key` otherwise, and notes
// on stderr when the count is above the machine's cores (allowed: results depend on the
// thread count, so a run made on a bigger machine can be reproduced, only slower).
constexpr int kMaxThreads = 1024;
void check_threads(int threads, const std::string& key);

// Splits T positions into n segments as evenly as possible, the longer ones first.
std::vector<int> segment_lengths(int T, int n);
// "24,24,24" or "25,25,24 (uneven)"
std::string describe_segments(const std::vector<int>& lengths);

}  // namespace rmt
