#pragma once
// The model's part of the run configuration (the `model:` keys of lib/run/config.h): what the
// numeric core needs to build a Model.
#include <string>

namespace rmt {

struct ModelConfig {
  std::string kind = "rmt";  // a name of lib/core/model_kind.h: baseline | mt | xl | rmt | xl_rmt | armt
                             // | deltanet | gated_deltanet
  int n_layer = 4, n_head = 4, d_head = 64, d_model = 128, d_inner = 256;
  double dropout = 0.1, dropatt = 0.0;
  int mem_len = 0;           // Transformer-XL cache rows per layer (xl, xl_rmt)
  int num_mem_tokens = 24;   // memory tokens (rmt, mt, xl_rmt, armt)
  // armt: the associative memory's query/key size before DPFP (its keys are 6 d_mem wide:
  // A is [6 d_mem, d_model] per layer and sample). 16: the scale of rmt's CPU models
  // (d_model 128); the authors use 64 with GPT-2's 768 (docs/armt.md).
  int d_mem = 16;
  // deltanet, gated_deltanet (docs/deltanet.md): n_head heads of d_head key columns and
  // expand_v * d_head value columns each (0: the kind's default, fla's layers' 1 for DeltaNet and
  // 2 for Gated DeltaNet); the causal convolution on q, k and v is short_conv rows wide (fla's
  // conv_size 4; 0: none, SiLU alone).
  int expand_v = 0;
  int short_conv = 4;
  // The delta rule's form (docs/deltanet.md, "The kernels"): C > 0 the chunked (WY) form with
  // chunks of C rows (16: the fastest of 16, 32, 64 at the bench's shapes on the CPU, bench/
  // delta_kernel.cpp; fla's GPU kernels use 64); 0 the recurrence, row by row. Same map, other
  // rounding.
  int delta_chunk = 16;
  bool read_mem_from_cache = true;
  // Initial memory: "original" = one N(0, 1) vector repeated for every memory token (the
  // authors' init_mem_tokens); "normal" = independent N(0, 0.02) entries, like the other weights,
  // which trains much faster at CPU scale (the N(0, 1) rows dwarf the token embeddings).
  std::string mem_init = "original";
  int n_token = 0;           // vocabulary size; 0 = take it from the dataset
};

}  // namespace rmt
