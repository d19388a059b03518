#pragma once
// What the reproduction draws beyond a sweep's tables (lib/experiments/reproduce.cpp): the
// language-model item's plot. (What it reads on the attention maps: attention_readings.h.)
#include <string>
#include <vector>

#include "lib/experiments/repro_claims.h"

namespace rmt {

// A gnuplot script drawing test bpc against the cache (Tr-XL) or memory (RMT, one line per
// BPTT) size into the PNG `out`; the baseline and xl_rmt as points at their size (the baseline,
// at 0, as a horizontal line).
std::string lm_plot_script(const std::vector<LmRow>& rows, const std::string& out, const std::string& title);

}  // namespace rmt
