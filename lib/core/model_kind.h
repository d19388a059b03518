#pragma once
// What each model kind is made of (docs/paper.md §2), stated once. Everything that depends on
// the kind (the model's layout, the config's checks, tables, the benchmark, the reproduction's
// manifest) asks this table instead of comparing names.
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/error.h"

namespace rmt {

// The token mixer of a kind's layers (lib/core/mixer.h): relative multi-head softmax attention
// (Transformer-XL's, lib/core/attention.h), or the delta rule of DeltaNet and of Gated DeltaNet
// (fla's layers, lib/core/delta_mixer.h, docs/deltanet.md), whose state S and short-convolution
// rows are carried from segment to segment.
enum class Mixer { attention, delta_rule, gated_delta_rule };

// In the paper's order of models (Figure 4), which tables and lists follow; then the delta-rule
// family (docs/deltanet.md).
enum class ModelKind { baseline, mt, xl, rmt, xl_rmt, armt, deltanet, gated_deltanet };

struct ModelKindTraits {
  ModelKind kind;
  const char* name;      // the value of model.kind, and the start of a table row's label
  const char* label;     // the paper's name for it, in plots and reports
  Mixer mixer;           // what mixes the tokens in each layer (lib/core/mixer.h)
  bool has_cache;        // a detached Transformer-XL cache of each layer's last model.mem_len input rows
  bool has_memory;       // model.num_mem_tokens memory tokens
  bool has_write_block;  // memory tokens at the segment's end, whose output is the memory written;
                         // without it (mt) the read rows' output is passed on
  bool has_read_block;   // memory tokens at the segment's start, reading the memory passed on;
                         // the written memory is the next segment's read block (gradients flow
                         // back through it). Without it (armt) the tokens carry nothing: they
                         // start from the learned vectors in every segment
  bool has_assoc;        // every layer has an associative memory (A, z) read before it at every
                         // row and written after it from the write block's output by the delta
                         // rule (ARMT, docs/armt.md); A and z are what links the segments
  bool causal_write;     // the write rows are causal among themselves like every other row (the
                         // authors' ARMT: a GPT-2 with the memory tokens appended); otherwise
                         // each write row sees the whole write block
  // model.read_mem_from_cache (the memory rows also attend to the cache) matters only when the
  // kind has both.
  constexpr bool reads_memory_from_cache() const { return has_cache && has_memory; }
  // The memory tokens' output is handed to the next segment (rmt, mt, xl_rmt; not armt).
  constexpr bool carries_memory_tokens() const { return has_memory && has_read_block; }
  // Every layer's mixer carries a state to the next segment, gradients flowing back through it
  // (the delta rule's S and convolution rows; attention's cache is detached).
  constexpr bool has_mixer_state() const { return mixer != Mixer::attention; }
};

inline constexpr ModelKindTraits kModelKinds[] = {
    // baseline: segments independent; mt: Memory Transformer; xl: Transformer-XL; rmt: Recurrent
    // Memory Transformer; xl_rmt: both; armt: Associative RMT; deltanet, gated_deltanet: the
    // delta rule as every layer's mixer (docs/deltanet.md).
    //                                                     cache  memory write  read   assoc  causal
    {ModelKind::baseline, "baseline", "baseline", Mixer::attention, false, false, false, false, false, false},
    {ModelKind::mt, "mt", "MT", Mixer::attention,                   false, true,  false, true,  false, false},
    {ModelKind::xl, "xl", "Tr-XL", Mixer::attention,                true,  false, false, false, false, false},
    {ModelKind::rmt, "rmt", "RMT", Mixer::attention,                false, true,  true,  true,  false, false},
    {ModelKind::xl_rmt, "xl_rmt", "Tr-XL + RMT", Mixer::attention,  true,  true,  true,  true,  false, false},
    {ModelKind::armt, "armt", "ARMT", Mixer::attention,             false, true,  true,  false, true,  true},
    {ModelKind::deltanet, "deltanet", "DeltaNet", Mixer::delta_rule, false, false, false, false, false, false},
    {ModelKind::gated_deltanet, "gated_deltanet", "Gated DeltaNet", Mixer::gated_delta_rule,
                                                                    false, false, false, false, false, false},
};
inline constexpr int kNumModelKinds = int(sizeof(kModelKinds) / sizeof(kModelKinds[0]));

constexpr const ModelKindTraits& traits_of(ModelKind kind) { return kModelKinds[int(kind)]; }

// The table is indexed by the enum: each row must sit at its kind's place.
constexpr bool model_kinds_in_enum_order() {
  for (int i = 0; i < kNumModelKinds; ++i)
    if (int(kModelKinds[i].kind) != i) return false;
  return true;
}
static_assert(model_kinds_in_enum_order(), "kModelKinds must list the kinds in ModelKind's order");

// The names in order: "baseline", "mt", "xl", "rmt", "xl_rmt", "armt", "deltanet", "gated_deltanet".
inline std::vector<std::string> model_kind_names() {
  std::vector<std::string> names;
  for (const ModelKindTraits& t : kModelKinds) names.push_back(t.name);
  return names;
}

// The names joined: "baseline, mt, ..., gated_deltanet" (sep ", "), for messages and help.
inline std::string model_kind_list(const char* sep = ", ") {
  return fmt::format("{}", fmt::join(model_kind_names(), sep));
}

inline std::optional<ModelKind> find_model_kind(const std::string& name) {
  for (const ModelKindTraits& t : kModelKinds)
    if (name == t.name) return t.kind;
  return std::nullopt;
}

// Fails naming the kinds when `name` is none of them.
inline ModelKind parse_model_kind(const std::string& name) {
  if (auto kind = find_model_kind(name)) return *kind;
  fail("unknown model kind '{}' (kinds: {})", name, model_kind_list());
}

// Whether `name` is a kind with an associative memory (armt); false for an unknown name.
inline bool kind_has_assoc(const std::string& name) {
  const std::optional<ModelKind> kind = find_model_kind(name);
  return kind && traits_of(*kind).has_assoc;
}

inline const ModelKindTraits& traits_of(const std::string& name) {
  return traits_of(parse_model_kind(name));
}

// Whether `name` is a kind whose mixer carries a state (deltanet, gated_deltanet); false for an
// unknown name.
inline bool kind_has_mixer_state(const std::string& name) {
  const std::optional<ModelKind> kind = find_model_kind(name);
  return kind && traits_of(*kind).has_mixer_state();
}

}  // namespace rmt
