#pragma once
// What the reproduction draws and reads beyond a sweep's tables (lib/experiments/reproduce.cpp):
// the language-model item's plot, and how RMT's write memory takes its tokens on the attention
// maps (Figures 6 and 8).
#include <string>
#include <vector>

#include "lib/experiments/attention_map.h"
#include "lib/experiments/repro_claims.h"

namespace rmt {

// A gnuplot script drawing test bpc against the cache (Tr-XL) or memory (RMT, one line per
// BPTT) size into the PNG `out`; the baseline and xl_rmt as points at their size (the baseline,
// at 0, as a horizontal line).
std::string lm_plot_script(const std::vector<LmRow>& rows, const std::string& out, const std::string& title);

// How the write memory of segment `s` takes its tokens, measured on the maps: for every layer
// and head, the number of write slots i whose most attended token is token i (in order) or token
// Ts-1-i (reversed); the best layer and head of each. "" when the segment has no write block or
// not one slot per token.
std::string write_order_text(const AttentionMaps& maps, int s);

}  // namespace rmt
