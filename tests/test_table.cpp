// rmt table / rmt plot: pivoting a hand-written results.csv, mean and std over seeds, formats,
// the paper's rows, and the gnuplot script.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include <yaml-cpp/yaml.h>

#include "lib/core/error.h"
#include "lib/experiments/results_heatmap.h"
#include "lib/experiments/results_table.h"
#include "lib/files/io.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {

// Two seeds per point; rmt's memory follows the segment length; one failed run; a quoted field.
const char* kResults =
    "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,segment_length,"
    "acc_teacher_forced,acc_free_running,solve_rate,loss,run_id,status,steps,wall_time_s,git_commit,threads,error\n"
    "baseline,1,0,0,all,1,36,1.0,0.9,,0.1,b1,done,10,1.0,abc,1,\n"
    "baseline,1,0,0,all,2,36,0.8,0.7,,0.1,b2,done,10,1.0,abc,1,\n"
    "baseline,2,0,0,all,1,18,0.1,0.1,,2.3,b3,done,10,1.0,abc,1,\n"
    "baseline,2,0,0,all,2,18,,,,,b4,failed,,,,,\"rmt: error: boom, \"\"quoted\"\"\"\n"
    "rmt,2,18,0,all,1,18,0.9,0.8,,0.2,r1,done,10,1.0,abc,1,\n"
    "rmt,2,18,0,all,2,18,0.7,0.6,,0.2,r2,done,10,1.0,abc,1,\n"
    "rmt,4,9,0,all,1,9,1.0,1.0,,0.0,r3,done,10,1.0,abc,1,\n"
    "xl,2,0,9,all,1,18,0.5,0.5,,1.0,x1,done,10,1.0,abc,1,\n"
    "xl,4,0,9,all,1,9,0.25,0.25,,1.5,x2,done,10,1.0,abc,1,\n";

// The paper ran the same task at twice the length: 72 positions, so 1 x 72, 2 x 36, 4 x 18.
const char* kPaper = R"Y(
tiny:
  task: copy 24
  seq_len: 72
  rows:
    baseline: {1: 1.00, 2: 0.12}
    "rmt (mem = seg len)": {2: 1.00, 4: 1.00, 9: 1.00}
    "mt (mem = seg len)": {2: 0.12}
    "xl (cache = seg len/2)": {2: 0.83, 4: 0.54}
)Y";

}  // namespace

TEST_CASE("table: csv parsing with quoted fields") {
  rmt::CsvTable csv = rmt::parse_csv(kResults, "r.csv");
  REQUIRE(csv.rows.size() == 9);
  CHECK(csv.rows[3][size_t(csv.column("error"))] == "rmt: error: boom, \"quoted\"");
  CHECK(csv.column("nope") == -1);
  CHECK_THROWS_AS(rmt::parse_csv("a,b\n1,2,3\n", "bad.csv"), rmt::Error);
}

TEST_CASE("table: pivot rows = model (+ memory), columns = segments, mean ± std over seeds") {
  rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_teacher_forced", {}, "r.csv");
  CHECK(p.segments == std::vector<int>{1, 2, 4});
  CHECK(p.segment_length.at(2) == 18);
  CHECK(p.failed == 1);
  REQUIRE(p.rows.size() == 3);
  CHECK(p.rows[0].label == "baseline");
  CHECK(p.rows[1].label == "xl (cache 9)");           // the same cache everywhere
  CHECK(p.rows[2].label == "rmt (mem = seg len)");     // memory tied to the segment length
  const rmt::Cell& b1 = p.rows[0].cells.at(1);
  CHECK(b1.n == 2);
  CHECK(b1.mean == doctest::Approx(0.9));
  CHECK(b1.std == doctest::Approx(0.141421356));       // sample std of {1.0, 0.8}
  CHECK(p.rows[0].cells.at(2).n == 1);                 // the failed seed is left out
  CHECK(p.rows[0].cells.at(2).std == 0);
  CHECK(p.rows[2].cells.at(2).mean == doctest::Approx(0.8));
  CHECK(p.rows[2].cells.count(1) == 0);

  std::string md = rmt::format_pivot(p, "md");
  CHECK(md.find("teacher-forced") != std::string::npos);  // the caption says which accuracy
  CHECK(md.find("| model | 1 x 36 | 2 x 18 | 4 x 9 |") != std::string::npos);
  CHECK(md.find("| baseline | 0.900 ± 0.141 (2) | 0.100 (1) |  |") != std::string::npos);
  CHECK(md.find("| rmt (mem = seg len) |  | 0.800 ± 0.141 (2) | 1.000 (1) |") != std::string::npos);
  CHECK(md.find("1 failed run(s) left out") != std::string::npos);

  rmt::Pivot fr = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_free_running", {}, "r.csv");
  CHECK(rmt::format_pivot(fr, "md").find("free-running") != std::string::npos);
  CHECK(fr.rows[0].cells.at(1).mean == doctest::Approx(0.8));

  std::string csv = rmt::format_pivot(p, "csv");
  CHECK(csv.rfind("model,source,segments,segment_length,mean,std,n\n", 0) == 0);
  CHECK(csv.find("baseline,measured,1,36,0.9,0.141421,2\n") != std::string::npos);
  std::string tex = rmt::format_pivot(p, "latex");
  CHECK(tex.find("\\begin{tabular}{lccc}") != std::string::npos);
  CHECK(tex.find("0.900 $\\pm$ 0.141 (2)") != std::string::npos);
  CHECK_THROWS_AS(rmt::format_pivot(p, "html"), rmt::Error);
  CHECK_THROWS_AS(rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc", {}, "r.csv"), rmt::Error);

  // --by splits rows further.
  rmt::Pivot by = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_teacher_forced", {"train.seed"}, "r.csv");
  CHECK(by.rows.size() == 5);  // baseline x2 seeds, xl x1, rmt x2
  CHECK(by.rows[0].label == "baseline (train.seed 1)");
}

TEST_CASE("table: the paper's numbers side by side") {
  rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_teacher_forced", {}, "r.csv");
  rmt::add_paper_rows(p, kPaper, "paper.yaml", "tiny");
  REQUIRE(p.rows.size() == 7);
  // The paper rows of a kind follow the measured rows of that kind, whatever memory either has;
  // a kind not measured (mt) keeps its place in the order of models.
  std::vector<std::string> labels;
  for (const auto& r : p.rows) labels.push_back((r.paper ? "paper: " : "") + r.label);
  CHECK(labels == std::vector<std::string>{"baseline", "paper: baseline", "paper: mt (mem = seg len)", "xl (cache 9)",
                                           "paper: xl (cache = seg len/2)", "rmt (mem = seg len)",
                                           "paper: rmt (mem = seg len)"});
  CHECK(p.paper_segment_length == std::map<int, int>{{1, 72}, {2, 36}, {4, 18}, {9, 8}});
  // Paper rows: the value only (no std, no n); columns by number of segments, both lengths noted.
  CHECK(rmt::format_pivot(p, "md") ==
        "**test answer accuracy, teacher-forced: mean ± std over seeds (n), paper rows: the paper's value; "
        "columns: number of segments (segment lengths in the note)** (acc_teacher_forced, from r.csv)\n"
        "\n"
        "| model | 1 seg | 2 seg | 4 seg |\n"
        "|---|---|---|---|\n"
        "| baseline | 0.900 ± 0.141 (2) | 0.100 (1) |  |\n"
        "| paper: baseline | 1.00 | 0.12 |  |\n"
        "| paper: mt (mem = seg len) |  | 0.12 |  |\n"
        "| xl (cache 9) |  | 0.500 (1) | 0.250 (1) |\n"
        "| paper: xl (cache = seg len/2) |  | 0.83 | 0.54 |\n"
        "| rmt (mem = seg len) |  | 0.800 ± 0.141 (2) | 1.000 (1) |\n"
        "| paper: rmt (mem = seg len) |  | 1.00 | 1.00 |\n"
        "\n"
        "Segment lengths: measured 1 x 36, 2 x 18, 4 x 9; paper (copy 24, 72 positions) 1 x 72, 2 x 36, 4 x 18. "
        "1 failed run(s) left out.\n");
  CHECK(rmt::format_pivot(p, "csv") ==
        "model,source,segments,segment_length,mean,std,n\n"
        "baseline,measured,1,36,0.9,0.141421,2\n"
        "baseline,measured,2,18,0.1,,1\n"
        "baseline,paper,1,72,1,,\n"
        "baseline,paper,2,36,0.12,,\n"
        "mt (mem = seg len),paper,2,36,0.12,,\n"
        "xl (cache 9),measured,2,18,0.5,,1\n"
        "xl (cache 9),measured,4,9,0.25,,1\n"
        "xl (cache = seg len/2),paper,2,36,0.83,,\n"
        "xl (cache = seg len/2),paper,4,18,0.54,,\n"
        "rmt (mem = seg len),measured,2,18,0.8,0.141421,2\n"
        "rmt (mem = seg len),measured,4,9,1,,1\n"
        "rmt (mem = seg len),paper,2,36,1,,\n"
        "rmt (mem = seg len),paper,4,18,1,,\n");
  std::string tex = rmt::format_pivot(p, "latex");
  CHECK(tex.find("model & 1 seg & 2 seg & 4 seg \\\\\n") != std::string::npos);
  CHECK(tex.find("paper: baseline & 1.00 & 0.12 &  \\\\\n") != std::string::npos);
  CHECK(tex.find("paper (copy 24, 72 positions) 1 $\\times$ 72, 2 $\\times$ 36, 4 $\\times$ 18.") != std::string::npos);
  // The plot draws paper rows dashed, without error bars.
  std::string gp = rmt::gnuplot_script(p, "fig.svg", "tiny");
  CHECK(gp.find("$row1 << EOD\n1 1\n2 0.12\nEOD\n") != std::string::npos);
  // Each kind in its own colour of the kinds table's order, its paper row in the same colour.
  CHECK(gp.find("dashtype 2 pointtype 6 linecolor rgb \"#7f7f7f\" title \"paper: baseline\"") != std::string::npos);
  CHECK(gp.find("dashtype 2 pointtype 6 linecolor rgb \"#56b4e9\" title \"paper: mt (mem = seg len)\"") != std::string::npos);
  CHECK(gp.find("linecolor rgb \"#e69f00\" title \"xl (cache 9)\"") != std::string::npos);
  CHECK(gp.find("dashtype 2 pointtype 6 linecolor rgb \"#e69f00\" title \"paper: xl (cache = seg len/2)\"") != std::string::npos);
  CHECK(gp.find("linecolor rgb \"#009e73\" title \"rmt (mem = seg len)\"") != std::string::npos);
  CHECK(gp.find("set grid linecolor rgb '#d9d9d9'") != std::string::npos);
  // --row-label: a kind's rows renamed, their memory kept; a label that names no row is an error.
  rmt::Pivot renamed = p;
  rmt::relabel_rows(renamed, {"xl=Transformer-XL", "baseline=Transformer"});
  CHECK(rmt::format_pivot(renamed, "md").find("| Transformer-XL (cache 9) |") != std::string::npos);
  CHECK(rmt::format_pivot(renamed, "md").find("| paper: Transformer |") != std::string::npos);
  CHECK_THROWS_WITH_AS(rmt::relabel_rows(renamed, {"armt=ARMT"}),
                       doctest::Contains("--row-label armt=ARMT: no row is labelled armt or of model kind armt"), rmt::Error);
  CHECK_THROWS_WITH_AS(rmt::relabel_rows(renamed, {"xl"}), doctest::Contains("expected OLD=NEW"), rmt::Error);
  CHECK(gp.find("set title \"tiny\\nmeasured: 1 x 36, 2 x 18, 4 x 9\\npaper (copy 24, 72 positions): 1 x 72, 2 x 36, "
                "4 x 18\" noenhanced\n") != std::string::npos);
  CHECK_THROWS_WITH_AS(rmt::add_paper_rows(p, kPaper, "paper.yaml", "nope"),
                       doctest::Contains("no section 'nope' (sections: tiny)"), rmt::Error);

  // Where the paper's segment lengths are the measured ones, columns keep "segments x length" and
  // there is no note; explicit segment_lengths override what seq_len gives.
  rmt::Pivot same = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_teacher_forced", {}, "r.csv");
  rmt::add_paper_rows(same, "tiny: {seq_len: 36, segment_lengths: {4: 9}, rows: {rmt: {2: 1.0, 4: 0.9}}}\n",
                      "paper.yaml", "tiny");
  std::string md = rmt::format_pivot(same, "md");
  CHECK(md.find("| model | 1 x 36 | 2 x 18 | 4 x 9 |\n") != std::string::npos);
  CHECK(md.find("| paper: rmt |  | 1.00 | 0.90 |\n") != std::string::npos);
  CHECK(md.find("Segment lengths") == std::string::npos);
  // The paper's lengths given per segment count only (one task per count, as Figure 5b).
  rmt::Pivot per = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_teacher_forced", {}, "r.csv");
  rmt::add_paper_rows(per, "tiny: {task: copy120 / copy240, segment_lengths: {2: 120, 4: 120}, rows: {\"xl (cache 60)\": {2: 0.78, 4: 0.125}}}\n",
                      "paper.yaml", "tiny");
  CHECK(rmt::format_pivot(per, "md").find("Segment lengths: measured 1 x 36, 2 x 18, 4 x 9; paper (copy120 / copy240) "
                                          "2 x 120, 4 x 120.") != std::string::npos);
}

TEST_CASE("table: row labels name each kind's memory and cache from the measured runs") {
  const std::string header = "model.kind,segments,model.num_mem_tokens,model.mem_len,segment_length,acc_teacher_forced,status\n";
  auto labels = [&](const std::string& rows) {
    rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(header + rows, "r.csv"), "acc_teacher_forced", {}, "r.csv");
    std::vector<std::string> out;
    for (const auto& r : p.rows) out.push_back(r.label);
    return out;
  };
  // Cache twice the segment, memory half of it (derive's integer division: 5 / 2 = 2).
  CHECK(labels("xl,2,0,36,18,1,done\nxl,4,0,18,9,1,done\nrmt,2,9,0,18,1,done\nrmt,4,4,0,9,1,done\nrmt,7,2,0,5,1,done\n") ==
        std::vector<std::string>{"xl (cache = 2 x seg len)", "rmt (mem = seg len/2)"});
  // One size in every run; a third of the segment.
  CHECK(labels("rmt,2,6,0,18,1,done\nrmt,4,6,0,9,1,done\nxl,2,0,6,18,1,done\nxl,4,0,3,9,1,done\n") ==
        std::vector<std::string>{"xl (cache = seg len/3)", "rmt (mem 6)"});
  // No one description: each run says its own.
  CHECK(labels("rmt,2,18,0,18,1,done\nrmt,4,4,0,9,1,done\nrmt,3,5,0,12,1,done\n") ==
        std::vector<std::string>{"rmt (mem 5)", "rmt (mem = seg len)", "rmt (mem = seg len/2)"});
  // Failed runs do not count towards the description.
  CHECK(labels("rmt,2,18,0,18,1,done\nrmt,4,9,0,9,1,done\nrmt,6,1,0,6,,failed\n") ==
        std::vector<std::string>{"rmt (mem = seg len)"});
  // A measured memory unlike the paper's still sits with the paper's row of the same kind.
  rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(header + "xl,2,0,36,18,1,done\nxl,4,0,18,9,1,done\nrmt,2,6,0,18,1,done\n", "r.csv"),
                                    "acc_teacher_forced", {}, "r.csv");
  rmt::add_paper_rows(p, "s: {seq_len: 36, rows: {\"rmt (mem = seg len)\": {2: 1.0}, \"xl (cache = seg len)\": {2: 0.9}}}",
                      "paper.yaml", "s");
  std::vector<std::string> got;
  for (const auto& r : p.rows) got.push_back((r.paper ? "paper: " : "") + r.label);
  CHECK(got == std::vector<std::string>{"xl (cache = 2 x seg len)", "paper: xl (cache = seg len)", "rmt (mem 6)",
                                        "paper: rmt (mem = seg len)"});
}

TEST_CASE("table: malformed results.csv is rejected naming the file and line") {
  const std::string header =
      "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,segment_length,"
      "acc_teacher_forced,acc_free_running,solve_rate,loss,run_id,status,steps,wall_time_s,git_commit,threads,error\n";
  const std::string good = "baseline,1,0,0,all,1,36,1.0,0.9,,0.1,b1,done,10,1.0,abc,1,\n";
  auto error = [&](const std::string& rows, const std::string& metric = "acc_teacher_forced") {
    return error_of([&] { rmt::pivot_results(rmt::parse_csv(header + rows, "r.csv"), metric, {}, "r.csv"); });
  };
  CHECK(error(good + "baseline,-3,0,0,all,2,36,1.0,0.9,,0.1,b2,done,10,1.0,abc,1,\n") ==
        "r.csv: line 3: segments '-3' is not an integer >= 1");
  CHECK(error(good + "baseline,x,0,0,all,2,36,1.0,0.9,,0.1,b2,done,10,1.0,abc,1,\n") ==
        "r.csv: line 3: segments 'x' is not an integer >= 1");
  CHECK(error(good + "baseline,99999999999,0,0,all,2,36,1.0,0.9,,0.1,b2,done,10,1.0,abc,1,\n") ==
        "r.csv: line 3: segments '99999999999' is not an integer >= 1");
  CHECK(error("rmt,2,-1,0,all,2,18,1.0,0.9,,0.1,b2,done,10,1.0,abc,1,\n") ==
        "r.csv: line 2: model.num_mem_tokens '-1' is not an integer >= 0");
  CHECK(error("baseline,1,0,0,all,2,0,1.0,0.9,,0.1,b2,done,10,1.0,abc,1,\n") ==
        "r.csv: line 2: segment_length '0' is not an integer >= 1");
  CHECK(error("baseline,1,0,0,all,2,36,abc,0.9,,0.1,b2,done,10,1.0,abc,1,\n") ==
        "r.csv: line 2: acc_teacher_forced 'abc' is not a finite number");
  CHECK(error("baseline,1,0,0,all,2,36,nan,0.9,,0.1,b2,done,10,1.0,abc,1,\n") ==
        "r.csv: line 2: acc_teacher_forced 'nan' is not a finite number");
  CHECK(error("baseline,1,0,0,all,2,36,1.5,0.9,,0.1,b2,done,10,1.0,abc,1,\n") ==
        "r.csv: line 2: acc_teacher_forced 1.5 is outside [0, 1]");
  CHECK(error("baseline,1,0,0,all,2,36,1.0,0.9,,-0.1,b2,done,10,1.0,abc,1,\n", "loss") ==
        "r.csv: line 2: loss -0.1 is negative");
  CHECK(error("baseline,1,0,0,all,2,36,1.0,0.9,,0.1,b2,running,10,1.0,abc,1,\n") ==
        "r.csv: line 2: status 'running' is neither done nor failed");
  CHECK(error("transformer,1,0,0,all,2,36,1.0,0.9,,0.1,b2,done,10,1.0,abc,1,\n") ==
        "r.csv: line 2: model.kind 'transformer' is not one of baseline, mt, xl, rmt, xl_rmt, armt, deltanet, gated_deltanet");
  // Lines are counted in the file, also across a quoted field that spans lines.
  CHECK(error("baseline,2,0,0,all,2,18,,,,,b4,failed,,,,,\"two\nlines\"\nbaseline,1,0,0,all,1,36,2.0,0.9,,0.1,b1,done,10,1.0,abc,1,\n") ==
        "r.csv: line 4: acc_teacher_forced 2.0 is outside [0, 1]");
  // CSV syntax.
  CHECK(error(good + "baseline,1\n") == "r.csv: line 3 has 2 fields, the header has 18");
  CHECK(error(good + "\n" + good) == "r.csv: line 3 has 1 fields, the header has 18");
  CHECK(error("baseline,1,0,0,all,2,36,1.0,0.9,,0.1,b2,done,10,1.0,abc,1,\"never closed\n") ==
        "r.csv: line 2: a quoted field is never closed");
  CHECK(error("baseline,1,0,0,all,2,36,1.0,0.9,,0.1,b2,done,10,1.0,abc,1,\"x\"y\n") ==
        "r.csv: line 2: unexpected 'y' after a closing quote (a quote inside a quoted field is written \"\")");
  CHECK(error("baseline,1,0,0,all,2,36,1.0,0.9,,0.1,b2,done,10,1.0,abc,1,x\"y\"\n") ==
        "r.csv: line 2: a quote in the middle of an unquoted field (quote the whole field)");
  CHECK(error_of([] { rmt::parse_csv("a,b,a\n1,2,3\n", "r.csv"); }) == "r.csv: line 1: column 'a' appears twice in the header");
  CHECK(error_of([] { rmt::parse_csv("a,,b\n1,2,3\n", "r.csv"); }) == "r.csv: line 1: column 2 of the header has no name");
  // A --by value with a quote or a comma is quoted properly in `--format csv` (and reads back).
  const std::string quoted_by = header + "baseline,1,0,0,\"a \"\"b\"\", c\",1,36,1.0,0.9,,0.1,b1,done,10,1.0,abc,1,\n";
  rmt::Pivot by = rmt::pivot_results(rmt::parse_csv(quoted_by, "r.csv"), "acc_teacher_forced", {"bptt"}, "r.csv");
  rmt::CsvTable back = rmt::parse_csv(rmt::format_pivot(by, "csv"), "out.csv");
  REQUIRE(back.rows.size() == 1);
  CHECK(back.rows[0][0] == "baseline (bptt a \"b\", c)");
  // CRLF files read like LF files.
  rmt::CsvTable crlf = rmt::parse_csv("a,b\r\n1,\"2\"\r\n", "r.csv");
  CHECK(crlf.rows == std::vector<std::vector<std::string>>{{"1", "2"}});
}

TEST_CASE("table: malformed paper YAML is rejected naming the file, line and key") {
  rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_teacher_forced", {}, "r.csv");
  auto error = [&](const std::string& yaml) {
    return error_of([&] { rmt::add_paper_rows(p, yaml, "paper.yaml", "tiny"); });
  };
  CHECK(error("tiny: {rows: {baseline: {1: abc}}}") ==
        "paper.yaml: line 1: tiny.rows.baseline: value 'abc' for 1 segments is not a number in [0, 1] (an accuracy or solve rate)");
  CHECK(error("tiny:\n  rows:\n    baseline: {1: 1.5}\n").find("paper.yaml: line 3: tiny.rows.baseline: value '1.5'") == 0);
  CHECK(error("tiny: {rows: {baseline: {1: [0.5]}}}").find("value (a list or mapping) for 1 segments") != std::string::npos);
  CHECK(error("tiny: {rows: {baseline: {0: 0.5}}}").find("'0' is not a number of segments") != std::string::npos);
  CHECK(error("tiny: {rows: {baseline: {x: 0.5}}}").find("'x' is not a number of segments") != std::string::npos);
  CHECK(error("tiny: {rows: {baseline: {1: 0.5, 1: 0.6}}}").find("1 segments is given twice") != std::string::npos);
  CHECK(error("tiny: {rows: {baseline: {1: 0.5}, baseline: {2: 0.6}}}").find("row 'baseline' is given twice") != std::string::npos);
  CHECK(error("tiny: {rows: {baseline: 0.5}}").find("expected a non-empty mapping {segments: value}") != std::string::npos);
  CHECK(error("tiny: {rows: {baseline: {1: 0.5}}, colour: red}").find("unknown key 'colour'") != std::string::npos);
  CHECK(error("tiny: {rows: [1, 2]}").find("expected 'rows:' mapping") != std::string::npos);
  CHECK(error("tiny: {rows: {}}\ntiny: {rows: {}}").find("section 'tiny' is given twice") != std::string::npos);
  CHECK(error("[1, 2]").find("paper.yaml: expected a mapping of sections") == 0);
  CHECK(error("tiny: {rows: {baseline: {1: 0.5}}").find("paper.yaml: malformed YAML at line 1") == 0);
  CHECK(error("").find("paper.yaml: expected a mapping of sections") == 0);
  // The section's own keys: task, seq_len, segment_lengths; every segment count needs a length.
  CHECK(error("tiny: {seq_len: 36, colour: red, rows: {baseline: {1: 0.5}}}") ==
        "paper.yaml: line 1: tiny: unknown key 'colour' (a section holds task, seq_len, segment_lengths, rows)");
  CHECK(error("tiny: {seq_len: 36, seq_len: 72, rows: {baseline: {1: 0.5}}}") ==
        "paper.yaml: line 1: tiny: 'seq_len' is given twice");
  CHECK(error("tiny:\n  rows:\n    baseline: {1: 0.5, 3: 0.1}\n") ==
        "paper.yaml: line 3: tiny.rows.baseline: 1 segments has no segment length: give the section's seq_len (the "
        "paper's input positions) or segment_lengths: {1: LENGTH}");
  CHECK(error("tiny: {segment_lengths: {1: 36}, rows: {baseline: {1: 0.5, 3: 0.1}}}").find(
            "tiny.rows.baseline: 3 segments has no segment length") != std::string::npos);
  CHECK(error("tiny: {seq_len: 4, rows: {baseline: {1: 0.5, 6: 0.1}}}") ==
        "paper.yaml: line 1: tiny.rows.baseline: 6 segments of the paper's 4 input positions (seq_len) leave empty segments");
  CHECK(error("tiny: {seq_len: 0, rows: {baseline: {1: 0.5}}}") ==
        "paper.yaml: line 1: tiny.seq_len: '0' is not a number of input positions (an integer >= 1)");
  CHECK(error("tiny: {seq_len: [72], rows: {baseline: {1: 0.5}}}") ==
        "paper.yaml: line 1: tiny.seq_len: a list or mapping is not a number of input positions (an integer >= 1)");
  CHECK(error("tiny: {seq_len: 7.5, rows: {baseline: {1: 0.5}}}").find("'7.5' is not a number of input positions") !=
        std::string::npos);
  CHECK(error("tiny: {segment_lengths: {x: 24}, rows: {baseline: {1: 0.5}}}") ==
        "paper.yaml: line 1: tiny.segment_lengths: 'x' is not a number of segments (an integer >= 1)");
  CHECK(error("tiny: {segment_lengths: {3: -24}, rows: {baseline: {1: 0.5}}}") ==
        "paper.yaml: line 1: tiny.segment_lengths: '-24' is not a segment length for 3 segments (an integer >= 1)");
  CHECK(error("tiny: {segment_lengths: {3: 24, 3: 12}, rows: {baseline: {1: 0.5}}}") ==
        "paper.yaml: line 1: tiny.segment_lengths: 3 segments is given twice");
  CHECK(error("tiny: {segment_lengths: [24, 12], rows: {baseline: {1: 0.5}}}").find(
            "tiny.segment_lengths: expected a non-empty mapping {segments: segment length}") != std::string::npos);
  CHECK(error("tiny: {task: [copy], seq_len: 36, rows: {baseline: {1: 0.5}}}") ==
        "paper.yaml: line 1: tiny.task: expected the paper's task as text, e.g. task: copy 24");
  CHECK(error("tiny: {seq_len: 36}").find("tiny: expected 'rows:' mapping model labels") != std::string::npos);
  // Row labels: a model kind, then its memory in parentheses.
  CHECK(error("tiny: {seq_len: 36, rows: {transformer: {1: 0.5}}}") ==
        "paper.yaml: line 1: tiny.rows.transformer: a row label is a model kind (baseline, mt, xl, rmt, xl_rmt, armt, deltanet, gated_deltanet), then "
        "its memory in parentheses, e.g. \"rmt (mem = seg len)\"");
  CHECK(error("tiny: {seq_len: 36, rows: {\"rmt mem 6\": {1: 0.5}}}").find("a row label is a model kind") != std::string::npos);
  CHECK(error("tiny: {seq_len: 36, rows: {\"rmt(mem 6)\": {1: 0.5}}}").find("a row label is a model kind") != std::string::npos);
}

TEST_CASE("plot: gnuplot script and rmt plot") {
  rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_teacher_forced", {}, "r.csv");
  std::string gp = rmt::gnuplot_script(p, "fig.svg", "tiny");
  CHECK(gp.find("set terminal svg") != std::string::npos);
  CHECK(gp.find("with yerrorlines") != std::string::npos);
  CHECK(gp.find("$row0 << EOD\n1 0.9 0.141421\n2 0.1 0\nEOD\n") != std::string::npos);
  CHECK(gp.find("title \"rmt (mem = seg len)\"") != std::string::npos);
  CHECK_THROWS_WITH_AS(rmt::gnuplot_script(p, "fig.xyz", "tiny"),
                       "--out fig.xyz: the figure file must end in .svg, .png, .pdf or .eps", rmt::Error);

  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;  // the CLI check needs gnuplot
  fs::path dir = fs::temp_directory_path() / "rmt_test_table";
  fs::remove_all(dir);
  fs::create_directories(dir / "tiny");
  rmt::write_file_atomic(dir / "tiny" / "results.csv", kResults);
  std::string svg = (dir / "fig.svg").string();
  std::string cmd = std::string(RMT_BINARY) + " plot " + (dir / "tiny" / "results.csv").string() + " --out " + svg +
                    " >/dev/null 2>&1";
  CHECK(std::system(cmd.c_str()) == 0);
  REQUIRE(fs::exists(svg));
  CHECK(rmt::read_file(svg).find("<svg") != std::string::npos);
  // Without gnuplot on PATH the message says what to install.
  std::string nogp = "PATH=/nonexistent " + std::string(RMT_BINARY) + " plot " + (dir / "tiny" / "results.csv").string() +
                     " --out " + svg + " 2>&1 | grep -q 'apt-get install gnuplot-nox'";
  CHECK(std::system(("sh -c \"" + nogp + "\"").c_str()) == 0);
}

TEST_CASE("table: every section of experiments/paper_results.yaml reads, with the paper's segment lengths") {
  const std::string text = rmt::read_file(std::string(RMT_SOURCE_DIR) + "/experiments/paper_results.yaml");
  const std::map<std::string, std::map<int, int>> lengths = {
      {"fig4_copy", {{1, 72}, {3, 24}, {6, 12}, {9, 8}}},
      {"fig4_reverse", {{1, 48}, {2, 24}, {4, 12}, {6, 8}}},
      {"fig4_retrieval", {{1, 10}, {2, 5}, {4, 3}, {5, 2}}},
      {"fig5a_copy360_segments", {{3, 120}, {6, 60}, {9, 40}}},
      {"fig5b_copy_lengths", {{3, 120}, {6, 120}, {9, 120}}},
      {"fig7_small_memory", {{3, 24}, {6, 12}}},
      {"fig7_reverse", {{4, 12}}},
      {"fig7c_reverse_long", {{2, 120}, {4, 60}, {6, 40}}},
      {"table1_sqeq", {{1, 180}, {6, 30}}},
      {"quick_copy", {{1, 72}, {3, 24}, {6, 12}}}};
  for (const auto& entry : YAML::Load(text)) CHECK_MESSAGE(lengths.count(entry.first.Scalar()), entry.first.Scalar());
  for (const auto& [section, want] : lengths) {
    CAPTURE(section);
    rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_teacher_forced", {}, "r.csv");
    rmt::add_paper_rows(p, text, "paper_results.yaml", section);
    CHECK(p.paper_segment_length == want);
    for (const auto& r : p.rows)
      if (r.paper && r.kind != "baseline") CHECK(r.label.find(" (") != std::string::npos);  // says its memory
  }
}

TEST_CASE("table: runs that stop when solved: seeds that met the target and their median step") {
  const std::string header =
      "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,train.target,segment_length,"
      "acc_teacher_forced,run_id,status,steps,end_reason,solved_step\n";
  const std::string rows = "rmt,3,6,0,all,1,0.99,6,1.0,r1,done,1500,solved,1000\n"
                           "rmt,3,6,0,all,2,0.99,6,0.99,r2,done,4500,solved,4000\n"
                           "rmt,3,6,0,all,3,0.99,6,0.98,r3,done,2500,solved,2000\n"
                           "rmt,9,2,0,all,1,0.99,2,0.5,r4,done,40000,max_steps,\n"
                           "rmt,9,2,0,all,2,0.99,2,0.3,r5,done,40000,max_steps,\n"
                           "baseline,3,0,0,all,1,,6,0.2,b1,done,100,max_steps,\n";
  rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(header + rows, "s.csv"), "acc_teacher_forced", {}, "s.csv");
  REQUIRE(p.rows.size() == 2);
  const rmt::Cell& three = p.rows[1].cells.at(3);
  CHECK(three.targeted == 3);
  CHECK(three.solved == 3);
  CHECK(*three.median_solved_step == 2000);
  CHECK(p.rows[1].cells.at(9).solved == 0);
  CHECK(!p.rows[1].cells.at(9).median_solved_step);
  const std::string md = rmt::format_pivot(p, "md");
  CHECK(md.find("seeds whose validation accuracy met the target / seeds") != std::string::npos);
  CHECK(md.find("| 0.990 ± 0.010 (3/3 solved, median step 2000) |") != std::string::npos);
  CHECK(md.find("| 0.400 ± 0.141 (0/2 solved) |") != std::string::npos);
  CHECK(md.find("| baseline | 0.200 (1) |  |") != std::string::npos);  // no target: n only
  const std::string csv = rmt::format_pivot(p, "csv");
  CHECK(csv.rfind("model,source,segments,segment_length,mean,std,n,solved,median_solved_step\n", 0) == 0);
  CHECK(csv.find("measured,3,6,0.99,0.01,3,3,2000\n") != std::string::npos);
  CHECK(csv.find("baseline,measured,3,6,0.2,,1,,\n") != std::string::npos);

  // A stopping column that cannot be read is an error naming the line.
  auto bad = [&](const std::string& row) {
    try {
      rmt::pivot_results(rmt::parse_csv(header + row, "s.csv"), "acc_teacher_forced", {}, "s.csv");
    } catch (const rmt::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(bad("rmt,3,6,0,all,1,0.99,6,1.0,r1,done,1500,finished,1000\n").find("line 2: end_reason 'finished'") != std::string::npos);
  CHECK(bad("rmt,3,6,0,all,1,0.99,6,1.0,r1,done,1500,solved,\n").find("line 2: solved_step ''") != std::string::npos);
  CHECK(bad("rmt,3,6,0,all,1,1.5,6,1.0,r1,done,1500,solved,10\n").find("train.target '1.5'") != std::string::npos);
  CHECK(bad("rmt,3,6,0,all,1,0.99,6,1.0,r1,done,1500,max_steps,10\n").find("solved_step 10 of a run whose end_reason is max_steps") != std::string::npos);
  CHECK(bad("rmt,3,6,0,all,1,,6,1.0,r1,done,1500,solved,10\n").find("without a target") != std::string::npos);
}

TEST_CASE("table and plot drop no data silently: runs without the metric are named, mixed families refused, the axis fits the metric") {
  // A finished run without a value for the metric (no greedy decoding) is left out and counted.
  const std::string header =
      "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,segment_length,"
      "acc_teacher_forced,acc_free_running,loss,bpc,run_id,status\n";
  const std::string rows = "baseline,1,0,0,all,1,18,1.0,0.9,0.1,,b1,done\n"
                           "baseline,1,0,0,all,2,18,0.8,,0.1,,b2,done\n";
  rmt::Pivot fr = rmt::pivot_results(rmt::parse_csv(header + rows, "m.csv"), "acc_free_running", {}, "m.csv");
  CHECK(fr.without_metric == 1);
  CHECK(rmt::format_pivot(fr, "md").find("1 finished run(s) without a value for acc_free_running left out.") !=
        std::string::npos);

  // A results.csv of language-model runs (bpc) and algorithmic runs together is refused.
  const std::string mixed = rows + "baseline,1,0,0,all,1,128,0.4,,1.7,2.45,l1,done\n";
  try {
    rmt::pivot_results(rmt::parse_csv(header + mixed, "m.csv"), "loss", {}, "m.csv");
    CHECK(false);
  } catch (const rmt::Error& e) {
    CHECK(std::string(e.what()).find("mixes 1 language-model run(s) (with bpc) and 2 algorithmic run(s)") !=
          std::string::npos);
  }

  // Accuracies are drawn on [0, 1.05], higher where an error bar reaches above it (0.9 + 0.141
  // here); a loss or bpc on an axis from 0 that fits it.
  rmt::Pivot acc = rmt::pivot_results(rmt::parse_csv(header + rows, "m.csv"), "acc_teacher_forced", {}, "m.csv");
  CHECK(rmt::gnuplot_script(acc, "f.svg", "t").find("set yrange [0:1.061]") != std::string::npos);
  rmt::Pivot one_seed = rmt::pivot_results(rmt::parse_csv(header + rows.substr(0, rows.find('\n') + 1), "m.csv"),
                                           "acc_teacher_forced", {}, "m.csv");
  CHECK(rmt::gnuplot_script(one_seed, "f.svg", "t").find("set yrange [0:1.05]") != std::string::npos);
  rmt::Pivot loss = rmt::pivot_results(rmt::parse_csv(header + rows, "m.csv"), "loss", {}, "m.csv");
  CHECK(rmt::gnuplot_script(loss, "f.svg", "t").find("set yrange [0:*]") != std::string::npos);
  const std::string lm_rows = "baseline,1,0,0,all,1,128,0.4,,1.7,7.9,l1,done\n";
  rmt::Pivot bpc = rmt::pivot_results(rmt::parse_csv(header + lm_rows, "m.csv"), "bpc", {}, "m.csv");
  CHECK(rmt::gnuplot_script(bpc, "f.svg", "t").find("set yrange [0:*]") != std::string::npos);
}

TEST_CASE("plot: figures for a paper: PDF and EPS, the key under the plot, a log-2 axis, rows apart, bars unclipped") {
  rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_teacher_forced", {}, "r.csv");
  const std::string gp = rmt::gnuplot_script(p, "fig.pdf", "tiny");
  // PDF through cairo, stopping with a message naming the terminal where gnuplot lacks it.
  CHECK(gp.find("if (strstrt(GPVAL_TERMINALS, 'pdfcairo') == 0)") != std::string::npos);
  CHECK(gp.find("this gnuplot has no pdfcairo terminal, which a .pdf figure needs") != std::string::npos);
  // At a column's width with 8 pt text by default; --size and --font-size give another.
  CHECK(gp.find("set terminal pdfcairo size 3.403in,3.000in enhanced font 'Helvetica,8' linewidth 0.5") !=
        std::string::npos);
  CHECK(rmt::gnuplot_script(p, "fig.pdf", "tiny", rmt::parse_figure_size("7,3.5", 10))
            .find("set terminal pdfcairo size 7.000in,3.500in enhanced font 'Helvetica,10'") != std::string::npos);
  // PNG at 150 px an inch, its text scaled alike (8 pt = 16.7 px).
  CHECK(rmt::gnuplot_script(p, "fig.png", "tiny").find("set terminal pngcairo size 510,450 enhanced font 'Helvetica,16.7'") !=
        std::string::npos);
  CHECK_THROWS_WITH_AS(rmt::parse_figure_size("3x2", 8), doctest::Contains("--size 3x2: expected WIDTH,HEIGHT in inches"),
                       rmt::Error);
  CHECK_THROWS_WITH_AS(rmt::parse_figure_size("3,0", 8), doctest::Contains("each above 0 and at most 40"), rmt::Error);
  CHECK_THROWS_WITH_AS(rmt::parse_figure_size("3,2", 2), doctest::Contains("--font-size 2: expected points from 4 to 40"),
                       rmt::Error);
  CHECK(rmt::gnuplot_script(p, "fig.eps", "tiny").find("set terminal epscairo") != std::string::npos);
  // The key under the plot, not beside it; segments on a log-2 axis with ticks at the columns.
  CHECK(gp.find("set key outside bottom center horizontal") != std::string::npos);
  CHECK(gp.find("key outside right") == std::string::npos);
  CHECK(gp.find("set logscale x 2\nset xtics (1, 2, 4)\n") != std::string::npos);
  // Rows at the same count sit apart: each its own factor on x, the middle one unmoved.
  CHECK(gp.find("$row0 using ($1*0.972655):2:3") != std::string::npos);
  CHECK(gp.find("$row1 using ($1*1):2:3") != std::string::npos);
  CHECK(gp.find("$row2 using ($1*1.02811):2:3") != std::string::npos);

  // One column: its rows spread across the axis, and an error bar above 1 stays in the picture.
  const std::string one_column =
      "model.kind,segments,model.num_mem_tokens,model.mem_len,train.seed,segment_length,acc_teacher_forced,status\n"
      "baseline,4,0,0,1,9,0.9,done\nbaseline,4,0,0,2,9,1.0,done\n"
      "xl,4,0,9,1,9,1.0,done\nxl,4,0,9,2,9,0.8,done\n";
  rmt::Pivot one = rmt::pivot_results(rmt::parse_csv(one_column, "one.csv"), "acc_teacher_forced", {}, "one.csv");
  const std::string gp1 = rmt::gnuplot_script(one, "one.svg", "one");
  CHECK(gp1.find("set xrange [2:8]") != std::string::npos);
  CHECK(gp1.find("$row0 using ($1*0.917004):2:3") != std::string::npos);  // -1/8 octave
  CHECK(gp1.find("$row1 using ($1*1.09051):2:3") != std::string::npos);   // +1/8 octave
  CHECK(gp1.find("set yrange [0:1.061]") != std::string::npos);           // 0.9 + 0.141 + 0.02

  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;  // drawing needs gnuplot
  fs::path dir = fs::temp_directory_path() / "rmt_test_paper_figs";
  fs::remove_all(dir);
  fs::create_directories(dir / "tiny");
  rmt::write_file_atomic(dir / "tiny" / "results.csv", kResults);
  const std::string results = (dir / "tiny" / "results.csv").string();
  Run r = rmt_run("plot " + results + " --out " + (dir / "fig.pdf").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(rmt::read_file(dir / "fig.pdf").compare(0, 5, "%PDF-") == 0);
  r = rmt_run("plot " + results + " --out " + (dir / "fig.eps").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(rmt::read_file(dir / "fig.eps").compare(0, 15, "%!PS-Adobe-3.0 ") == 0);
  r = rmt_run("plot " + results + " --out " + (dir / "fig.jpg").string());
  CHECK(r.status == 1);
  CHECK(r.output.find("fig.jpg: the figure file must end in .svg, .png, .pdf or .eps") != std::string::npos);
  CHECK(!fs::exists(dir / "fig.jpg"));
}

TEST_CASE("plot --heatmap: a task x length heat map, crisp, the number in each cell") {
  rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_teacher_forced", {}, "r.csv");
  const std::string gp = rmt::heatmap_gnuplot_script({{"copy", p}, {"reverse", p}}, "map.svg", "t");
  INFO(gp);
  CHECK(gp.find("with image pixels") != std::string::npos);  // cells as rectangles, never a bitmap
  CHECK(gp.find("\"copy: rmt (mem = seg len)\" 2") != std::string::npos);
  CHECK(gp.find("\"reverse: baseline\" 3") != std::string::npos);
  CHECK(gp.find("set arrow from graph 0, first 2.5 to graph 1, first 2.5") != std::string::npos);  // between blocks
  CHECK(gp.find("$map << EOD\n0.9 0.1 NaN\nNaN 0.5 0.25\nNaN 0.8 1\n") != std::string::npos);  // blank: no runs
  CHECK(gp.find("1 2 \"0.80\"\n") != std::string::npos);  // rmt at 2 segments
  CHECK(gp.find("set cbrange [0:1]") != std::string::npos);

  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;
  fs::path dir = fs::temp_directory_path() / "rmt_test_heatmap";
  fs::remove_all(dir);
  for (const char* task : {"copy", "reverse"}) {
    fs::create_directories(dir / task);
    rmt::write_file_atomic(dir / task / "results.csv", kResults);
  }
  const std::string svg = (dir / "map.svg").string();
  Run r = rmt_run("plot --heatmap " + (dir / "copy" / "results.csv").string() + " " +
                  (dir / "reverse" / "results.csv").string() + " --out " + svg);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const std::string text = rmt::read_file(svg);
  CHECK(text.find("<image") == std::string::npos);
  CHECK(text.find("reverse: xl (cache 9)") != std::string::npos);
  CHECK(text.find("0.80") != std::string::npos);
  r = rmt_run("plot --heatmap " + (dir / "copy" / "results.csv").string() + " --curves " + dir.string() +
              " --out " + svg);
  CHECK(r.status != 0);
}

TEST_CASE("table --format latex: booktabs, a label, $\\pm$, --digits, n in the caption when every cell has it") {
  rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(kResults, "r.csv"), "acc_teacher_forced", {}, "r.csv");
  const std::string tex = rmt::format_pivot(p, "latex", {3, "tab:tiny"});
  CHECK(tex.find("% needs \\usepackage{booktabs}\n") == 0);
  CHECK(tex.find("\\toprule\nmodel & 1 $\\times$ 36 & 2 $\\times$ 18 & 4 $\\times$ 9 \\\\\n\\midrule\n") != std::string::npos);
  CHECK(tex.find("\\bottomrule\n\\end{tabular}\n") != std::string::npos);
  CHECK(tex.find("\\hline") == std::string::npos);
  CHECK(tex.find("\\label{tab:tiny}\n\\end{table}\n") != std::string::npos);
  CHECK(tex.find("±") == std::string::npos);  // caption included: $\pm$ only
  CHECK(tex.find("mean $\\pm$ std over seeds (n)") != std::string::npos);  // n differs between cells: kept
  CHECK(tex.find("baseline & 0.900 $\\pm$ 0.141 (2) & 0.100 (1) &  \\\\\n") != std::string::npos);
  // --digits: fewer or more decimals, in md and latex alike.
  CHECK(rmt::format_pivot(p, "latex", {1, ""}).find("baseline & 0.9 $\\pm$ 0.1 (2) & 0.1 (1)") != std::string::npos);
  CHECK(rmt::format_pivot(p, "latex", {1, ""}).find("\\label") == std::string::npos);
  CHECK(rmt::format_pivot(p, "md", {5, ""}).find("| baseline | 0.90000 ± 0.14142 (2) | 0.10000 (1) |") !=
        std::string::npos);
  CHECK(rmt::format_pivot(p, "md") == rmt::format_pivot(p, "md", {3, ""}));
  CHECK_THROWS_WITH_AS(rmt::format_pivot(p, "md", {7, ""}), "--digits 7: expected 0 to 6 decimals", rmt::Error);

  // Every cell of two seeds: "(2)" leaves the cells, the caption says it.
  const std::string two_seeds =
      "model.kind,segments,model.num_mem_tokens,model.mem_len,train.seed,segment_length,acc_teacher_forced,status\n"
      "baseline,1,0,0,1,9,0.9,done\nbaseline,1,0,0,2,9,1.0,done\n"
      "rmt,1,4,0,1,9,1.0,done\nrmt,1,4,0,2,9,0.8,done\n";
  rmt::Pivot same = rmt::pivot_results(rmt::parse_csv(two_seeds, "s.csv"), "acc_teacher_forced", {}, "s.csv");
  const std::string tex2 = rmt::format_pivot(same, "latex");
  CHECK(tex2.find("baseline & 0.950 $\\pm$ 0.071 \\\\\n") != std::string::npos);
  CHECK(tex2.find("(2)") == std::string::npos);
  CHECK(tex2.find("mean $\\pm$ std over 2 seeds;") != std::string::npos);
  CHECK(rmt::format_pivot(same, "md").find("0.950 ± 0.071 (2)") != std::string::npos);  // markdown as before

  // The CLI: the label from the sweep's name or --label; bad --digits and --label refused.
  fs::path dir = fs::temp_directory_path() / "rmt_test_latex";
  fs::remove_all(dir);
  fs::create_directories(dir / "my_sweep");
  rmt::write_file_atomic(dir / "my_sweep" / "results.csv", kResults);
  const std::string results = (dir / "my_sweep" / "results.csv").string();
  Run r = rmt_run("table " + results + " --format latex --digits 2");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("\\label{tab:my_sweep}") != std::string::npos);
  CHECK(r.output.find("0.90 $\\pm$ 0.14 (2)") != std::string::npos);
  r = rmt_run("table " + results + " --format latex --label tab:copy-results");
  CHECK(r.output.find("\\label{tab:copy-results}") != std::string::npos);
  r = rmt_run("table " + results + " --digits -1");
  CHECK(r.status == 1);
  CHECK(r.output.find("--digits -1: expected a number of decimals from 0 to 6") != std::string::npos);
  r = rmt_run("table " + results + " --format latex --label 'a b'");
  CHECK(r.status == 1);
  CHECK(r.output.find("--label 'a b': a LaTeX label holds no spaces") != std::string::npos);
}

TEST_CASE("table: runs that differ in a setting column are rows of their own, never seeds of one cell") {
  // Two datasets (a grid over data.dir), two seeds each: pooled, the cell was 0.5 +- 0.4 over 4.
  const std::string csv = "data.dir,model.kind,train.seed,segments,model.num_mem_tokens,model.mem_len,segment_length,"
                          "train.lr,acc_teacher_forced,run_id,status,git_commit\n"
                          "a,rmt,1,2,4,0,6,0.001,0.9,r1,done,c1\n"
                          "b,rmt,1,2,4,0,6,0.001,0.1,r2,done,c1\n"
                          "a,rmt,2,2,4,0,6,0.001,0.8,r3,done,c2\n"
                          "b,rmt,2,2,4,0,6,0.001,0.2,r4,done,c2\n";
  rmt::Pivot p = rmt::pivot_results(rmt::parse_csv(csv, "r.csv"), "acc_teacher_forced", {}, "r.csv");
  CHECK(p.split_by == std::vector<std::string>{"data.dir"});  // the seed and the commit pool
  REQUIRE(p.rows.size() == 2);
  CHECK(p.rows[0].label == "rmt (mem 4, data.dir a)");
  CHECK(p.rows[0].cells.at(2).n == 2);
  CHECK(p.rows[0].cells.at(2).mean == doctest::Approx(0.85));
  CHECK(p.rows[1].label == "rmt (mem 4, data.dir b)");
  CHECK(p.rows[1].cells.at(2).mean == doctest::Approx(0.15));
  // A column given with --by is not split again; one that varies in no cell is left alone.
  rmt::Pivot by = rmt::pivot_results(rmt::parse_csv(csv, "r.csv"), "acc_teacher_forced", {"data.dir"}, "r.csv");
  CHECK(by.split_by.empty());
  CHECK(by.rows.size() == 2);
  // Only within a cell: runs on two datasets at different segment counts share a row.
  const std::string apart = "data.dir,model.kind,train.seed,segments,model.num_mem_tokens,model.mem_len,segment_length,"
                            "acc_teacher_forced,run_id,status\n"
                            "a,rmt,1,2,4,0,6,0.9,r1,done\nb,rmt,1,4,4,0,3,0.1,r2,done\n";
  rmt::Pivot one = rmt::pivot_results(rmt::parse_csv(apart, "r.csv"), "acc_teacher_forced", {}, "r.csv");
  CHECK(one.split_by.empty());
  CHECK(one.rows.size() == 1);
  // The table says why its rows were split.
  CHECK(rmt::format_pivot(p, "md").find("Rows split by data.dir") != std::string::npos);
}
