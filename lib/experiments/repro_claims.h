#pragma once
// The paper's pattern as checks on measured results: a sweep item's claims on the means of its
// pivoted table (check_claim), a language-model item's claims comparing two runs'
// bpc.
#include <string>
#include <vector>

#include "lib/experiments/repro_manifest.h"
#include "lib/experiments/results_table.h"

namespace rmt {

// Claim check on a pivoted table: "holds" / "fails" / "no data" and the numbers it used.
struct ClaimResult {
  enum State { holds, fails, no_data } state = no_data;
  std::string detail;
  std::vector<int> failing_segments;  // the claim's segment counts where it fails
};
// A claim with the paper's value holds where the measured mean is within `tolerance` of it; an
// `above` claim where the model's mean exceeds the other's by more than `tolerance`.
ClaimResult check_claim(const Claim& claim, const Pivot& pivot, double tolerance = 0);
// Where a claim's stated paper value disagrees with the paper's row of `pivot` (add_paper_rows)
// at the same segments by more than rounding: "the claim states 0.30 at 9 segments, the paper
// file 0.28"; "" where they agree or the pivot has no paper value there.
std::string paper_value_disagreement(const Claim& claim, const Pivot& pivot);

// One finished run of a language-model sweep, as its results.csv row says; or, after lm_means,
// one model setting over its seeds (bpc, loss and wall_s the means).
struct LmRow {
  std::string model;
  int cache = 0, memory = 0, bptt = 0;
  double bpc = 0, loss = 0, wall_s = 0;
  int seeds = 1;
  double bpc_sd = 0;                // sample standard deviation over the seeds (0 for one)
  double bpc_min = 0, bpc_max = 0;  // the seeds' range
};

// The runs grouped by setting (model, cache, memory, BPTT), in the order each first appears,
// with the mean, standard deviation and range of their bpc over the seeds.
std::vector<LmRow> lm_means(const std::vector<LmRow>& runs);

// "rmt memory 4 BPTT 1": a selector as the report names it.
std::string selector_text(const LmSelector& s);
// Whether run's mean bpc is below claim.below's (by claim.margin), on lm_means rows; no data
// when either selector matches no setting or more than one. With several seeds the detail says
// whether the difference is larger than the spread between seeds (the wider of the two ranges).
ClaimResult check_lm_claim(const LmClaim& claim, const std::vector<LmRow>& rows);
int claims_holding(const std::vector<ClaimResult>& claims);
// One checked claim as the report lists it: its text and what it measures ("acc_teacher_forced",
// "test bpc").
struct ClaimLine {
  std::string text, measure;
};
std::vector<ClaimLine> claim_lines(const std::vector<Claim>& claims);    // each on its metric
std::vector<ClaimLine> claim_lines(const std::vector<LmClaim>& claims);  // each on test bpc
// The verdict ("The paper's pattern holds in part (1 of 2 checks):") and one line per check, as
// the report prints an item's checks; results[i] is the outcome of claims[i].
// `beyond_the_paper`: the item's claims are the project's own ("The project's claims hold").
std::string claims_markdown(const std::vector<ClaimLine>& claims, const std::vector<ClaimResult>& results,
                            bool beyond_the_paper = false);

}  // namespace rmt
