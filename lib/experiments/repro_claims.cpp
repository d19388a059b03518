#include "lib/experiments/repro_claims.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace rmt {

namespace {

const PivotRow* measured_row(const Pivot& pivot, const std::string& kind) {
  for (const auto& row : pivot.rows)
    if (!row.paper && row.label.substr(0, row.label.find(' ')) == kind) return &row;
  return nullptr;
}

bool lm_matches(const LmSelector& sel, const LmRow& row) {
  return sel.model == row.model && (sel.cache < 0 || sel.cache == row.cache) &&
         (sel.memory < 0 || sel.memory == row.memory) && (!sel.bptt || *sel.bptt == row.bptt);
}

// The paper's value as it gives it, to at least two decimals: 0.28, 0.125, 1.00, 0.10.
std::string paper_number(double v) {
  const std::string text = fmt::format("{}", v);
  const size_t dot = text.find('.');
  return dot == std::string::npos || text.size() - dot - 1 < 2 ? fmt::format("{:.2f}", v) : text;
}

}  // namespace

std::vector<LmRow> lm_means(const std::vector<LmRow>& runs) {
  std::vector<LmRow> out;
  std::vector<std::vector<double>> bpcs;
  for (const LmRow& r : runs) {
    size_t i = 0;
    while (i < out.size() && !(out[i].model == r.model && out[i].cache == r.cache &&
                               out[i].memory == r.memory && out[i].bptt == r.bptt))
      ++i;
    if (i == out.size()) {
      out.push_back(r);
      out.back().seeds = 0;
      out.back().bpc = out.back().loss = out.back().wall_s = 0;
      bpcs.emplace_back();
    }
    LmRow& g = out[i];
    g.seeds += 1;
    g.bpc += r.bpc;
    g.loss += r.loss;
    g.wall_s += r.wall_s;
    bpcs[i].push_back(r.bpc);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    LmRow& g = out[i];
    const double n = g.seeds;
    g.bpc /= n, g.loss /= n, g.wall_s /= n;
    double ss = 0;
    for (double b : bpcs[i]) ss += (b - g.bpc) * (b - g.bpc);
    g.bpc_sd = g.seeds > 1 ? std::sqrt(ss / (n - 1)) : 0;
    g.bpc_min = *std::min_element(bpcs[i].begin(), bpcs[i].end());
    g.bpc_max = *std::max_element(bpcs[i].begin(), bpcs[i].end());
  }
  return out;
}

std::string selector_text(const LmSelector& s) {
  std::string t = s.model;
  if (s.cache >= 0) t += fmt::format(" cache {}", s.cache);
  if (s.memory >= 0) t += fmt::format(" memory {}", s.memory);
  if (s.bptt) t += fmt::format(" BPTT {}", *s.bptt);
  return t;
}

ClaimResult check_lm_claim(const LmClaim& claim, const std::vector<LmRow>& rows) {
  ClaimResult res;
  auto find_one = [&](const LmSelector& sel) -> const LmRow* {
    const LmRow* found = nullptr;
    for (const auto& r : rows)
      if (lm_matches(sel, r)) {
        if (found) {
          res.detail = fmt::format("more than one run matches {}", selector_text(sel));
          return nullptr;
        }
        found = &r;
      }
    if (!found && res.detail.empty()) res.detail = fmt::format("no finished run of {}", selector_text(sel));
    return found;
  };
  const LmRow* a = find_one(claim.run);
  if (!a) return res;
  const LmRow* b = find_one(claim.below);
  if (!b) return res;
  const bool ok = a->bpc < b->bpc + claim.margin;
  res.state = ok ? ClaimResult::holds : ClaimResult::fails;
  auto value = [](const LmRow& r) {
    return r.seeds > 1 ? fmt::format("{:.3f} ± {:.3f}", r.bpc, r.bpc_sd) : fmt::format("{:.3f}", r.bpc);
  };
  res.detail = fmt::format("{}: {} vs {}: {}{}", selector_text(claim.run), value(*a), selector_text(claim.below),
                           value(*b), claim.margin != 0 ? fmt::format(" (margin {:+.3f})", claim.margin) : "");
  if (a->seeds > 1 || b->seeds > 1) {
    const double diff = std::fabs(a->bpc - b->bpc);
    const double spread = std::max(a->bpc_max - a->bpc_min, b->bpc_max - b->bpc_min);
    res.detail += fmt::format("; difference {:.3f} {} the seeds' spread {:.3f}", diff,
                              diff > spread ? "larger than" : "within", spread);
  }
  return res;
}

int claims_holding(const std::vector<ClaimResult>& claims) {
  return int(std::count_if(claims.begin(), claims.end(), [](const ClaimResult& r) { return r.state == ClaimResult::holds; }));
}

std::vector<ClaimLine> claim_lines(const std::vector<Claim>& claims) {
  std::vector<ClaimLine> lines;
  for (const Claim& c : claims) lines.push_back({c.text, c.metric});
  return lines;
}

std::vector<ClaimLine> claim_lines(const std::vector<LmClaim>& claims) {
  std::vector<ClaimLine> lines;
  for (const LmClaim& c : claims) lines.push_back({c.text, "test bpc"});
  return lines;
}

std::string claims_markdown(const std::vector<ClaimLine>& claims, const std::vector<ClaimResult>& results,
                            bool beyond_the_paper) {
  const int holds = claims_holding(results);
  const int n = int(results.size());
  const std::string verdict =
      beyond_the_paper ? (holds == n ? "**The project's claims hold**"
                          : holds == 0 ? "**None of the project's claims holds**"
                                       : "**The project's claims hold in part**")
                       : (holds == n ? "**The paper's pattern holds**"
                          : holds == 0 ? "**The paper's pattern does not appear**"
                                       : "**The paper's pattern holds in part**");
  std::string s = fmt::format("{} ({} of {} checks):\n\n", verdict, holds, n);
  for (size_t i = 0; i < results.size(); ++i) {
    const ClaimResult& r = results[i];
    const char* mark = r.state == ClaimResult::holds ? "holds" : r.state == ClaimResult::fails ? "FAILS" : "no data";
    s += fmt::format("- {}: {} ({}; {})\n", mark, claims[i].text, claims[i].measure, r.detail);
  }
  return s;
}

std::string paper_value_disagreement(const Claim& claim, const Pivot& pivot) {
  for (const auto& row : pivot.rows) {
    if (!row.paper || row.kind != claim.model) continue;
    for (size_t i = 0; i < claim.paper.size(); ++i) {
      const auto cell = row.cells.find(claim.segments[i]);
      if (cell != row.cells.end() && std::fabs(cell->second.mean - claim.paper[i]) > 0.0005)
        return fmt::format("claim '{}' states the paper's value {} at {} segments; the paper's file has {} (row {})", claim.text,
                           paper_number(claim.paper[i]), claim.segments[i], paper_number(cell->second.mean), row.label);
    }
  }
  return "";
}

ClaimResult check_claim(const Claim& claim, const Pivot& pivot, double tolerance) {
  ClaimResult res;
  const PivotRow* row = measured_row(pivot, claim.model);
  const PivotRow* other = claim.above.empty() ? nullptr : measured_row(pivot, claim.above);
  std::vector<std::string> parts;
  bool all = true;
  for (size_t i = 0; i < claim.segments.size(); ++i) {
    const int seg = claim.segments[i];
    auto cell = row ? row->cells.find(seg) : decltype(row->cells.end()){};
    if (!row || cell == row->cells.end()) {
      res.detail = fmt::format("no {} result at {} segments", claim.model, seg);
      return res;
    }
    const double v = cell->second.mean;
    bool ok = true;
    std::string part = fmt::format("{} at {}: {:.2f}", claim.model, seg, v);
    if (claim.min && v < *claim.min) ok = false;
    if (claim.max && v > *claim.max) ok = false;
    if (!claim.paper.empty()) {
      ok = std::fabs(v - claim.paper[i]) <= tolerance + 1e-9;
      part = fmt::format("{} at {}: {:.3f}, the paper {}", claim.model, seg, v, paper_number(claim.paper[i]));
    }
    if (other) {
      auto oc = other->cells.find(seg);
      if (oc == other->cells.end()) {
        res.detail = fmt::format("no {} result at {} segments", claim.above, seg);
        return res;
      }
      part += fmt::format(" vs {} {:.2f}", claim.above, oc->second.mean);
      if (!(v > oc->second.mean + tolerance)) ok = false;
    } else if (!claim.above.empty()) {
      res.detail = fmt::format("no {} results", claim.above);
      return res;
    }
    all = all && ok;
    if (!ok) res.failing_segments.push_back(seg);
    parts.push_back(part);
  }
  std::string bound;
  if (claim.min) bound += fmt::format(" (needs >= {})", *claim.min);
  if (claim.max) bound += fmt::format(" (needs <= {})", *claim.max);
  if (!claim.paper.empty()) bound += fmt::format(" (needs within {} of the paper)", tolerance);
  if (!claim.above.empty() && tolerance > 0) bound += fmt::format(" (needs ahead by more than {})", tolerance);
  res.state = all ? ClaimResult::holds : ClaimResult::fails;
  res.detail = fmt::format("{}{}", fmt::join(parts, "; "), bound);
  return res;
}

}  // namespace rmt
