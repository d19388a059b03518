// rmt reproduce: the checks on the measured means, against the paper's values within the
// manifest's tolerance (repro_claims.h), and a reading's numbers computed from the data
// (repro_readings.h).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "lib/experiments/learning_curves.h"
#include "lib/experiments/repro_claims.h"
#include "lib/experiments/repro_manifest.h"
#include "lib/experiments/repro_readings.h"
#include "lib/experiments/results_table.h"
#include "tests/cli.h"

namespace fs = std::filesystem;
using namespace rmt;

namespace {

// Three Tr-XL seeds and two RMT seeds at 9 segments; RMT seed 2 met the stopping rule.
const char* kResults =
    "model.kind,segments,train.seed,model.num_mem_tokens,model.mem_len,acc_teacher_forced,acc_free_running,"
    "status,steps,end_reason,solved_step\n"
    "xl,9,2,0,4,0.48,0.40,done,40000,max_steps,\n"
    "xl,9,1,0,4,0.79,0.60,done,40000,max_steps,\n"
    "xl,9,3,0,4,0.67,0.41,done,40000,max_steps,\n"
    "rmt,9,1,2,0,0.995,0.99,done,40000,max_steps,\n"
    "rmt,9,2,2,0,1.0,1.0,done,15000,solved,14500\n"
    "rmt,3,1,2,0,1.0,1.0,failed,0,,\n";

// Tr-XL seed 1 at 9 segments: its 3-segment stage, then falling at 9 segments.
const char* kCurves =
    "kind,seed,segments,run_id,step,val_acc,val_segments\n"
    "xl,1,9,xl1,10000,0.95,3\n"
    "xl,1,9,xl1,20000,0.79,9\n"
    "xl,1,9,xl1,30000,0.70,9\n"
    "xl,1,9,xl1,40000,0.57,9\n"
    "xl,2,9,xl2,20000,0.38,9\n"
    "xl,2,9,xl2,40000,0.45,9\n";

struct Fixture {
  CsvTable csv = parse_csv(kResults, "results.csv");
  ReadingData data{&csv, "acc_teacher_forced", parse_curves_csv(kCurves, "learning_curves.csv")};
  std::string fill(const std::string& text) { return fill_reading(text, data, "items.x.notes"); }
  std::string error(const std::string& text) {
    return error_of([&] { fill(text); });
  }
};

Pivot pivot_of(const std::string& csv) { return pivot_results(parse_csv(csv, "t.csv"), "acc_teacher_forced", {}, "t.csv"); }

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("reproduce readings: test values, outcomes and steps computed from results.csv") {
  Fixture f;
  CHECK(f.fill("Tr-XL at the ceiling: {{test model=xl segments=9}}.") == "Tr-XL at the ceiling: 0.79 / 0.48 / 0.67.");
  CHECK(f.fill("{{test model=xl segments=9 seed=3 metric=acc_free_running}}") == "0.41");
  CHECK(f.fill("{{test_mean model=xl segments=9 digits=3}}") == "0.647");
  CHECK(f.fill("{{test_range model=rmt digits=3}}") == "0.995-1.000");  // the failed run is not counted
  CHECK(f.fill("{{test_range model=rmt segments=3,9 digits=3}}") == "0.995-1.000");
  CHECK(f.fill("{{solved model=rmt segments=9}} solved, {{ended reason=max_steps}} at the ceiling") ==
        "1 of 2 solved, 4 of 5 at the ceiling");
  CHECK(f.fill("{{solved_steps}}, median {{median_solved_step model=rmt}}") == "14500, median 14500");
  CHECK(f.fill("no placeholder") == "no placeholder");
}

TEST_CASE("reproduce readings: validation ranges, single evaluations and trends from the learning curves") {
  Fixture f;
  // At the run's own 9 segments only: the 3-segment stage's 0.95 is not in the range.
  CHECK(f.fill("{{val_range model=xl segments=9}}") == "0.38-0.79");
  CHECK(f.fill("{{val_range model=xl segments=9 seed=1 from=30000}}") == "0.57-0.70");
  CHECK(f.fill("{{val_range model=xl segments=9 seed=1 stage=3}}") == "0.95");
  CHECK(f.fill("{{val_at model=xl segments=9 seed=1 step=30000}}") == "0.70");
  // (0.57 - 0.79) over 20000 steps: -0.110 per 10000 steps.
  CHECK(f.fill("{{val_slope model=xl segments=9 seed=1 last=3}}") == "-0.110");
  CHECK(f.fill("{{val_slope model=xl segments=9 seed=2 last=2}}") == "+0.035");
}

TEST_CASE("reproduce readings: a placeholder that is unknown, malformed or matches no data is refused") {
  Fixture f;
  CHECK(f.error("{{range model=xl}}").find("items.x.notes: unknown placeholder {{range model=xl}}") != std::string::npos);
  CHECK(f.error("{{test model=xl segments=9 colour=red}}").find("unknown key 'colour'") != std::string::npos);
  CHECK(f.error("{{test model=xl}}").find("test needs segments=") != std::string::npos);
  CHECK(f.error("{{test model=xl segments}}").find("'segments' is not key=value") != std::string::npos);
  CHECK(f.error("{{test model=mt segments=9}}").find("no finished run of model=mt segments=9") != std::string::npos);
  CHECK(f.error("{{median_solved_step model=xl}}").find("no run of model=xl met the stopping rule") != std::string::npos);
  CHECK(f.error("{{val_at model=xl segments=9 seed=1 step=25000}}").find("no evaluation") != std::string::npos);
  CHECK(f.error("{{val_slope model=xl segments=9 seed=2 last=5}}").find("has 2 evaluations, not 5") != std::string::npos);
  CHECK(f.error("{{test model=xl segments=9 metric=bpc}}").find("has no column bpc") != std::string::npos);
  CHECK(f.error("open {{test model=xl").find("'{{' without its '}}'") != std::string::npos);
}

TEST_CASE("reproduce: claims are checked on the measured means") {
  Pivot p = pivot_of(
      "model.kind,segments,model.num_mem_tokens,model.mem_len,train.seed,acc_teacher_forced,status\n"
      "rmt,3,4,0,1,0.98,done\nrmt,3,4,0,2,0.96,done\nrmt,6,4,0,1,0.5,done\n"
      "xl,3,0,4,1,0.99,done\nxl,6,0,4,1,0.3,done\n");
  Claim c{"rmt solves", "rmt", {3}, 0.9, std::nullopt, "", "", {}};
  CHECK(check_claim(c, p).state == ClaimResult::holds);
  c.segments = {3, 6};
  ClaimResult r = check_claim(c, p);
  CHECK(r.state == ClaimResult::fails);
  CHECK(r.detail.find("rmt at 6: 0.50") != std::string::npos);
  Claim above{"rmt ahead", "rmt", {6}, std::nullopt, std::nullopt, "xl", "", {}};
  CHECK(check_claim(above, p).state == ClaimResult::holds);
  above.segments = {3};  // 0.97 is not above 0.99
  CHECK(check_claim(above, p).state == ClaimResult::fails);
  Claim upper{"xl degrades", "xl", {6}, std::nullopt, 0.6, "", "", {}};
  CHECK(check_claim(upper, p).state == ClaimResult::holds);
  Claim missing{"mt", "mt", {3}, 0.1, std::nullopt, "", "", {}};
  CHECK(check_claim(missing, p).state == ClaimResult::no_data);
  Claim missing_seg{"rmt at 9", "rmt", {9}, 0.1, std::nullopt, "", "", {}};
  CHECK(check_claim(missing_seg, p).state == ClaimResult::no_data);
}

TEST_CASE("reproduce: a claim against the paper's value holds within the tolerance, and fails outside it") {
  Pivot p = pivot_results(parse_csv(kResults, "results.csv"), "acc_teacher_forced", {}, "results.csv");
  Claim xl{"Tr-XL degrades", "xl", {9}, std::nullopt, std::nullopt, "", "", {0.28}};
  ClaimResult r = check_claim(xl, p, 0.05);
  CHECK(r.state == ClaimResult::fails);  // 0.647 against 0.28
  CHECK(r.detail == "xl at 9: 0.647, the paper 0.28 (needs within 0.05 of the paper)");
  CHECK(check_claim(Claim{"chance", "xl", {9}, std::nullopt, std::nullopt, "", "", {0.1}}, p, 0.05).detail ==
        "xl at 9: 0.647, the paper 0.10 (needs within 0.05 of the paper)");
  xl.paper = {0.60};
  CHECK(check_claim(xl, p, 0.05).state == ClaimResult::holds);  // 0.047 from it
  CHECK(check_claim(xl, p, 0.04).state == ClaimResult::fails);
  // Ahead by more than the tolerance: 0.998 against 0.647.
  Claim ahead{"RMT ahead", "rmt", {9}, std::nullopt, std::nullopt, "xl", "", {}};
  CHECK(check_claim(ahead, p, 0.05).state == ClaimResult::holds);
  CHECK(check_claim(ahead, p, 0.4).state == ClaimResult::fails);
  // A paper value that the paper's file gives otherwise is named (the report refuses it).
  add_paper_rows(p, "s:\n  task: copy\n  seq_len: 18\n  rows:\n    \"xl (cache 4)\": {9: 0.28}\n", "paper.yaml", "s");
  xl.paper = {0.30};
  CHECK(paper_value_disagreement(xl, p) ==
        "claim 'Tr-XL degrades' states the paper's value 0.30 at 9 segments; the paper's file has 0.28 (row xl (cache 4))");
  xl.paper = {0.28};
  CHECK(paper_value_disagreement(xl, p).empty());
  // The project's own claims are headed as the project's.
  const std::string md = claims_markdown(claim_lines({xl}), {r}, true);
  CHECK(md.rfind("**None of the project's claims holds** (0 of 1 checks):", 0) == 0);
}

TEST_CASE("reproduce: the manifest's paper values and tolerance are read strictly") {
  const fs::path dir = fresh_tmp("rmt_repro_readings", "manifest");
  write(dir / "paper.yaml", "s: {task: copy, seq_len: 18, rows: {}}\n");
  write(dir / "s.yaml", "data: {task: copy}\n");
  auto error_for = [&](const std::string& top, const std::string& claim, const std::string& item_extra = "") {
    write(dir / "m.yaml", "paper: paper.yaml\n" + top + "items:\n  a:\n    kind: sweep\n    title: t\n    paper_says: p\n" +
                              item_extra + "    sweep: s.yaml\n    metrics: [acc_teacher_forced]\n    claims:\n      - " +
                              claim + "\n");
    return error_of([&] { load_manifest((dir / "m.yaml").string()); });
  };
  const std::string ok = "{text: t, model: xl, segments: [6, 9], paper: [0.97, 0.28]}";
  CHECK(error_for("tolerance: 0.05\n", ok).empty());
  CHECK(error_for("tolerance: 0.05\n", "{text: t, model: xl, segments: [6, 9], paper: 0.5}").empty());
  CHECK(error_for("", ok).find("the top level needs tolerance") != std::string::npos);
  CHECK(error_for("tolerance: 2\n", ok).find("tolerance: must be in [0, 1)") != std::string::npos);
  CHECK(error_for("tolerance: 0.05\n", "{text: t, model: xl, segments: [6, 9], paper: [0.97]}")
            .find("1 values for 2 segment counts") != std::string::npos);
  CHECK(error_for("tolerance: 0.05\n", "{text: t, model: xl, segments: [9], paper: 0.28, max: 0.6}")
            .find("leave out min, max and above") != std::string::npos);
  CHECK(error_for("tolerance: 0.05\n", ok, "    beyond_the_paper: true\n").find("the item is beyond the paper") !=
        std::string::npos);
  CHECK(error_for("tolerance: 0.05\n", ok, "    beyond_the_paper: maybe\n").find("expected true or false") !=
        std::string::npos);
  CHECK(error_for("tolerance: 0.05\n", ok, "    outside_records: earlier runs\n").empty());
  // A reading citing the paper cites a value of the item's checks or of its paper_says.
  CHECK(error_for("tolerance: 0.05\n", ok, "    notes: Tr-XL beats the paper's 0.28, below the paper's 0.97.\n").empty());
  CHECK(error_for("tolerance: 0.05\n", ok, "    notes: Tr-XL is above the paper's 0.30 here.\n")
            .find("items.a.notes: cites \"the paper's 0.30\", which none of the item's checks") != std::string::npos);
  CHECK(error_for("tolerance: 0.05\n", ok, "    notes: \"{{test model=xl segments=9 colour=red}}\"\n")
            .find("items.a.notes: {{test model=xl segments=9 colour=red}}: unknown key 'colour'") != std::string::npos);
}
