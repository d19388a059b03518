// rmt reproduce: the manifest reader and a whole tiny reproduction through the
// CLI (sweep, attention maps, length generalisation, REPORT.md, resume).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <variant>

#include <nlohmann/json.hpp>

#include "lib/core/provenance.h"
#include "lib/experiments/learning_curves.h"
#include "lib/experiments/repro_claims.h"
#include "lib/experiments/repro_manifest.h"
#include "lib/experiments/repro_templates.h"
#include "lib/experiments/reproduce.h"
#include "lib/experiments/results_table.h"
#include "lib/files/io.h"
#include "tests/cli.h"

namespace fs = std::filesystem;
using namespace rmt;

namespace {

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A tiny sweep (copy of 4 symbols, one layer of d_model 16, 30 steps) and a manifest over it.
const char* kReproSweep = R"Y(data: {task: copy, length: 4, symbols: 10, train: 200, val: 50, test: 50, seed: 0}
base:
  bptt: all
  model: {n_layer: 1, n_head: 2, d_head: 8, d_model: 16, d_inner: 32, dropout: 0.0, mem_init: normal}
  train: {batch_size: 16, lr: 1.0e-3, schedule: constant, warmup_steps: 0, clip: 1.0, max_steps: 30,
          eval_every: 15, log_every: 15, curriculum: 3, curriculum_advance: mastery, target: 0.01,
          target_evals: 1}
grid:
  - {model.kind: [baseline], segments: [1, 3], train.seed: [1]}
  - {model.kind: [xl, rmt], segments: [3], train.seed: [1, 2]}
derive: {model.num_mem_tokens: segment_length, model.mem_len: segment_length}
)Y";

const char* kPaper = R"Y(tiny:
  task: copy 4
  seq_len: 12
  rows:
    baseline: {1: 1.00, 3: 0.12}
    "rmt (mem = seg len)": {3: 1.00}
)Y";

std::string manifest_text(const std::string& extra_item = "") {
  return std::string(R"Y(paper: paper.yaml
items:
  tiny:
    kind: sweep
    title: "a tiny copy"
    paper_says: "RMT solves copy"
    notes: "{{solved}} runs met the stopping rule; the baseline got {{test model=baseline segments=1 digits=3}}."
    sweep: tiny.yaml
    paper_section: tiny
    metrics: [acc_teacher_forced, acc_free_running]
    claims:
      - {text: "the baseline is below 2", model: baseline, segments: [1, 3], max: 2}
      - {text: "RMT is at 1.5 or more", model: rmt, segments: [3], min: 1.5}
      - {text: "the baseline is at 1.5 or more", model: baseline, segments: [1], min: 1.5}
  maps:
    kind: attention
    title: "attention"
    paper_says: "RMT writes into memory"
    notes: "RMT's write slots take token i in {{test model=rmt segments=3 digits=3}} of the slots."
    from: tiny
    samples: 5
    measures: [write_in_order, rewrite_mass, cache_source_reads]
    claims:
      - {text: "RMT's write slots put a share of at least 0 on the read memory", model: rmt, segments: [3], metric: rewrite_mass, min: 0}
      - {text: "RMT writes in order in more than all its slots", model: rmt, segments: [3], min: 1.01}
      - {text: "Tr-XL reads its cache along straight lines", model: xl, segments: [3], metric: cache_source_reads, min: 0}
    runs:
      - {model: rmt, segments: 3, seed: 1}
      - {model: xl, segments: 3}
  longer:
    kind: length
    title: "length"
    paper_says: "none"
    from: tiny
    runs: [{model: rmt, segments: 3, seed: 1}, {model: xl, segments: 3, seed: 2}]
    lengths: [4, 8]
    claims:
      - {text: "RMT is at most 1 at 6 segments", model: rmt, segments: [6], max: 1}
)Y") + extra_item;
}

// The report's templates (experiments/reproduce/report_templates.md) beside a test's manifest.
void copy_report_templates(const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy_file(fs::path(RMT_SOURCE_DIR) / "experiments/reproduce/report_templates.md", dir / "report_templates.md",
                fs::copy_options::overwrite_existing);
}

fs::path tiny_project(const std::string& name, const std::string& manifest) {
  fs::path dir = fresh_tmp("rmt_reproduce", name);
  copy_report_templates(dir);
  write(dir / "tiny.yaml", kReproSweep);
  write(dir / "paper.yaml", kPaper);
  write(dir / "m.yaml", manifest);
  return dir;
}

}  // namespace

TEST_CASE("reproduce: bad manifests are refused naming the file, the item and the reason") {
  auto error_for = [](const std::string& text) {
    fs::path dir = tiny_project("bad_manifest", text);
    return error_of([&] { load_manifest((dir / "m.yaml").string()); });
  };
  CHECK(error_for(manifest_text()).empty());
  CHECK(error_for("paper: paper.yaml\nitems: {}\n").find("non-empty map of items") != std::string::npos);
  CHECK(error_for("paper: paper.yaml\nitems:\n  [a, b]: {kind: sweep}\n").find("not a valid manifest") != std::string::npos);
  CHECK(error_for("paper: [1\n").find("not valid YAML") != std::string::npos);
  CHECK(error_for("paper: nope.yaml\nitems: {a: {kind: sweep}}\n").find("nope.yaml is not a file") != std::string::npos);
  CHECK(error_for(manifest_text() + "    colour: red\n").find("unknown key 'colour'") != std::string::npos);
  std::string text = manifest_text();
  std::string bad_kind = text;
  bad_kind.replace(bad_kind.find("kind: attention"), 15, "kind: heatmap");
  CHECK(error_for(bad_kind).find("unknown kind 'heatmap'") != std::string::npos);
  std::string no_bound = text;
  no_bound.replace(no_bound.find(", max: 2"), 8, "");
  CHECK(error_for(no_bound).find("a claim needs paper, min, max or above") != std::string::npos);
  std::string bad_model = text;
  bad_model.replace(bad_model.find("model: rmt, segments: [3], min"), 10, "model: rnn");
  CHECK(error_for(bad_model).find("unknown model kind 'rnn'") != std::string::npos);
  std::string bad_from = text;
  bad_from.replace(bad_from.find("from: tiny"), 10, "from: maps");
  CHECK(error_for(bad_from).find("'maps' is not a sweep item given before this one") != std::string::npos);
  std::string bad_metric = text;
  bad_metric.replace(bad_metric.find("acc_free_running]"), 16, "accuracy");
  CHECK(error_for(bad_metric).find("unknown metric 'accuracy'") != std::string::npos);
  std::string exact_match = text;  // the associative-retrieval items' measure (a whole value right)
  exact_match.replace(exact_match.find("acc_free_running]"), 16, "exact_match");
  CHECK(error_for(exact_match).empty());
  // A length item may take every run of its sweep; an attention item names its runs.
  std::string all_runs = text;
  const std::string two_runs = "runs: [{model: rmt, segments: 3, seed: 1}, {model: xl, segments: 3, seed: 2}]";
  all_runs.replace(all_runs.find(two_runs), two_runs.size(), "runs: all");
  CHECK(error_for(all_runs).empty());
  const std::string maps_runs = "runs:\n      - {model: rmt, segments: 3, seed: 1}\n      - {model: xl, segments: 3}\n";
  auto with_maps_runs = [&](const std::string& runs) {
    std::string changed = text;
    changed.replace(changed.find(maps_runs), maps_runs.size(), runs);
    return changed;
  };
  CHECK(error_for(with_maps_runs("runs: all\n")).find("maps.runs: expected a non-empty list") != std::string::npos);
  // An attention item measures each cell (model, segments) over every seed, once.
  CHECK(error_for(with_maps_runs("runs: [{model: xl, segments: 3}, {model: xl, segments: 3, seed: 2}]\n"))
            .find("items.maps.runs[1]: xl at 3 segments is also runs[0]") != std::string::npos);
  auto with_maps_line = [&](const std::string& line, const std::string& instead) {
    std::string changed = text;
    changed.replace(changed.find(line), line.size(), instead);
    return changed;
  };
  CHECK(error_for(with_maps_line("samples: 5", "samples: 0")).find("items.maps.samples: must be in 1..") !=
        std::string::npos);
  CHECK(error_for(with_maps_line("samples: 5", "samples: many")).find("items.maps.samples: expected an integer") !=
        std::string::npos);
  CHECK(error_for(with_maps_line("[write_in_order, rewrite_mass", "[write_order, rewrite_mass"))
            .find("items.maps.measures: unknown measure 'write_order' (measures: write_in_order, ") != std::string::npos);
  CHECK(error_for(with_maps_line("measures: [write_in_order, rewrite_mass, cache_source_reads]", "measures: []"))
            .find("items.maps.measures: expected a non-empty list") != std::string::npos);
  CHECK(error_for(with_maps_line("metric: cache_source_reads, min: 0", "metric: shared_cache_reads, min: 0"))
            .find("is on shared_cache_reads, which is not in the item's measures") != std::string::npos);
  CHECK(error_for(with_maps_line("segments: [3], min: 1.01", "segments: [3], paper: 1.00"))
            .find("items.maps.claims[1]: the paper gives no numbers for its attention maps") != std::string::npos);
  // Without measures: every one, the first (write_in_order) the claims' default.
  const std::string all_measures = with_maps_line("    measures: [write_in_order, rewrite_mass, cache_source_reads]\n", "");
  CHECK(error_for(all_measures).empty());
  const ReproManifest read = load_manifest((tiny_project("attention_defaults", all_measures) / "m.yaml").string());
  const AttentionItem& maps = std::get<AttentionItem>(read.find("maps")->part);
  CHECK(maps.measures.size() == 9);
  CHECK(maps.samples == 5);
  CHECK(maps.claims[1].metric == "write_in_order");
  CHECK(maps.runs[0].seed_given);
  CHECK_FALSE(maps.runs[1].seed_given);
  std::string no_sweep = text;
  no_sweep.replace(no_sweep.find("sweep: tiny.yaml"), 16, "sweep: gone.yaml");
  CHECK(error_for(no_sweep).find("gone.yaml is not a file") != std::string::npos);
}

TEST_CASE("reproduce: a whole tiny reproduction through the CLI, then a re-run that trains nothing") {
  fs::path dir = tiny_project("cli", manifest_text());
  const std::string base = "reproduce --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                           (dir / "runs").string() + " --out " + (dir / "out").string();
  Run r = rmt_run(base + " --list");
  CHECK(r.status == 0);
  CHECK(r.output.find("longer") != std::string::npos);
  expect_error(base + " nosuch", "unknown reproduction 'nosuch'");

  r = rmt_run(base + " -j 2");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const fs::path out = dir / "out";
  for (const char* f : {"REPORT.md", "tiny/results.csv", "tiny/table.md", "tiny/tiny.png", "tiny/timing.json",
                        "maps/maps.md", "maps/rmt_3seg_seed1.png", "longer/results.csv", "longer/table.md",
                        "longer/longer.png", "length_heatmap.png"})
    CHECK_MESSAGE(fs::exists(out / f), f);
  // --list now says how long the item took (its timing.json)
  Run listed = rmt_run(base + " --list");
  CHECK(listed.output.find(" at -j 2 (6 runs)") != std::string::npos);
  const std::string report = read_file(out / "REPORT.md");
  // The claims: the first holds on any accuracy, the other two can not (accuracies are <= 1).
  CHECK(report.find("holds: the baseline is below 2") != std::string::npos);
  CHECK(report.find("FAILS: RMT is at 1.5 or more") != std::string::npos);
  CHECK(report.find("FAILS: the baseline is at 1.5 or more") != std::string::npos);
  CHECK(report.find("1 of 3 checks hold") != std::string::npos);
  // The reading's numbers are computed from the runs.
  CHECK(report.find(" of 6 runs met the stopping rule; the baseline got ") != std::string::npos);
  CHECK(report.find("{{") == std::string::npos);
  CHECK(report.find("paper: baseline") != std::string::npos);
  CHECK(report.find("![tiny](tiny/tiny.png)") != std::string::npos);
  // Runs that stop when solved: the cells count the seeds that met the target (the 1-segment
  // baseline at its first evaluation; the 3-segment runs master their first stage at step 15, the
  // second stage's share ends at step 20, the last stage is met at step 30), and the learning
  // curves of the hardest cell and of the 1-segment cell, where a check fails, are drawn.
  CHECK(report.find("seeds whose validation accuracy met the target / seeds") != std::string::npos);
  CHECK(report.find("(1/1 solved, median step 15)") != std::string::npos);
  CHECK(report.find("(2/2 solved, median step 30)") != std::string::npos);
  CHECK(report.find("Learning curves of the hardest cell (3 segments; 5 runs, every model and seed; validation "
                    "accuracy at the segments of the run's curriculum stage,") != std::string::npos);  // mastery
  CHECK(report.find("![tiny learning curves at 3 segments](tiny/tiny_curves.png)") != std::string::npos);
  CHECK(fs::exists(out / "tiny/tiny_curves.png"));
  CHECK(report.find("Learning curves at 1 segment, where the check \"the baseline is at 1.5 or more\" fails "
                    "(1 run,") != std::string::npos);
  CHECK(report.find("![tiny learning curves at 1 segment](tiny/tiny_curves_1seg.png)") != std::string::npos);
  CHECK(fs::exists(out / "tiny/tiny_curves_1seg.png"));
  const std::string curves = read_file(out / "tiny/learning_curves.csv");
  CHECK(curves.rfind("kind,seed,segments,run_id,step,val_acc,val_segments\n", 0) == 0);
  CHECK(curves.find("rmt,2,3,") != std::string::npos);
  CHECK(curves.find("baseline,1,1,") != std::string::npos);  // every run's curve is kept
  const std::string results = read_file(out / "tiny/results.csv");
  CHECK(results.find("train.target") != std::string::npos);
  CHECK(results.find(",solved,15,") != std::string::npos);
  CHECK(report.find("rmt_3seg_seed1.png") != std::string::npos);
  // The attention item: every seed of each cell measured on 5 samples (one results.csv row a
  // run), one map per cell (RMT's named seed, Tr-XL's lowest), the tables and the project's checks.
  CHECK(fs::exists(out / "maps/xl_3seg_seed1.png"));
  CHECK_FALSE(fs::exists(out / "maps/rmt_3seg_seed2.png"));
  const CsvTable measured = parse_csv(read_file(out / "maps/results.csv"), "maps/results.csv");
  CHECK(measured.rows.size() == 4);
  const int c_write = measured.column("write_in_order"), c_cache = measured.column("cache_source_reads"),
            c_kind = measured.column("model.kind"), c_samples = measured.column("samples");
  for (const auto& row : measured.rows) {
    CAPTURE(row[size_t(c_kind)]);
    CHECK(row[size_t(c_samples)] == "5");
    CHECK(row[size_t(c_write)].empty() == (row[size_t(c_kind)] == "xl"));  // no write memory in Tr-XL
    CHECK(row[size_t(c_cache)].empty() == (row[size_t(c_kind)] == "rmt"));  // no cache in RMT
  }
  const std::string maps_md = read_file(out / "maps/maps.md");
  CHECK(maps_md.find("`write_in_order`: share of write slots i whose strongest column is token i") != std::string::npos);
  CHECK(maps_md.find("rewrite_mass by segment: 1: ") != std::string::npos);
  CHECK(maps_md.find("**The project's claims hold in part** (2 of 3 checks)") != std::string::npos);
  CHECK(maps_md.find("- FAILS: RMT writes in order in more than all its slots (write_in_order; rmt at 3: ") !=
        std::string::npos);
  CHECK(report.find("| [maps](#maps) | attention | 2 of 3 checks hold |") != std::string::npos);
  CHECK(report.find("RMT's write slots take token i in ") != std::string::npos);
  {  // more samples than the test split has: refused, naming the item and the run, the results kept
    const std::string manifest = read_file(dir / "m.yaml");
    std::string more = manifest;
    more.replace(more.find("samples: 5"), 10, "samples: 51");
    write(dir / "m.yaml", more);
    expect_error(base + " maps", "items.maps.samples: 51 is beyond the test split of rmt-seg3-seed1-");
    write(dir / "m.yaml", manifest);
    CHECK(read_file(out / "maps/maps.md") == maps_md);
  }
  // Its runs' checkpoints are read by the attention and length items: no records (run_records.h).
  CHECK_FALSE(fs::exists(out / "tiny/runs"));
  // Length generalisation: each run at 4 and 8 symbols (12 and 24 positions, 3 and 6 segments of 4).
  const std::string longer = read_file(out / "longer/results.csv");
  CHECK(longer.find("rmt,3,4,0,1,4,4,3,") != std::string::npos);
  CHECK(longer.find("rmt,6,4,0,1,4,8,3,") != std::string::npos);
  CHECK(longer.find("xl,6,0,4,2,4,8,3,") != std::string::npos);
  // Its checks are on the evaluated segments, in its table and in the report's summary.
  CHECK(read_file(out / "longer/table.md").find("- holds: RMT is at most 1 at 6 segments") != std::string::npos);
  CHECK(report.find("| [longer](#longer) | length | 1 of 1 checks hold |") != std::string::npos);
  // The length items side by side, task x length, at the report's end.
  CHECK(report.find("## Length generalisation at a glance") != std::string::npos);
  CHECK(report.find("](length_heatmap.png)") != std::string::npos);

  // -j 2 evaluated 2 at a time (threads of one CPU thread each); -j 1 one after another: the same numbers.
  auto without_seconds = [](const std::string& text) {  // eval_seconds, the 13th column, dropped
    std::string kept, line;
    std::istringstream in(text);
    while (std::getline(in, line)) {
      size_t start = 0;
      for (int k = 0; k < 12; ++k) start = line.find(',', start) + 1;
      kept += line.substr(0, start) + line.substr(line.find(',', start)) + "\n";
    }
    return kept;
  };
  const std::string parallel = read_file(out / "longer/results.csv");
  fs::remove_all(dir / "runs/longer/evals");
  r = rmt_run(base + " longer");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(without_seconds(read_file(out / "longer/results.csv")) == without_seconds(parallel));

  // A second call finds every run done: nothing is trained again, the results are the same.
  const std::string csv = read_file(dir / "runs/tiny/results.csv");
  r = rmt_run(base + " tiny -j 2");
  CHECK(r.status == 0);
  CHECK(r.output.find("all 6 runs done") != std::string::npos);
  CHECK(read_file(dir / "runs/tiny/results.csv") == csv);
  // --report-only at another -j rewrites the report as it was: the commands keep the -j the
  // item was trained at, and nothing in it depends on the machine that writes it. Each item says
  // where its runs came from.
  const std::string written = read_file(out / "REPORT.md");
  r = rmt_run(base + " --report-only -j 1");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(read_file(out / "REPORT.md") == written);
  CHECK(written.find("`rmt sweep " + (dir / "tiny.yaml").string() + " -j 2 ") != std::string::npos);
  CHECK(written.find("Runs: 6 finished runs; commit ") != std::string::npos);
  CHECK(written.find("; CPU " + rmt::cpu_model_name() + " (6); vector extensions ") != std::string::npos);
  // A length item's checks are those of the manifest as it is now, evaluated from its results.csv
  // (nothing evaluated again): a claim changed after the evaluation is checked by --report-only.
  const std::string manifest = read_file(dir / "m.yaml");
  std::string changed = manifest;
  changed.replace(changed.find("RMT is at most 1 at 6 segments\", model: rmt, segments: [6], max: 1"), 66,
                  "RMT is below 0 at 6 segments\", model: rmt, segments: [6], max: -1");
  write(dir / "m.yaml", changed);
  r = rmt_run(base + " --report-only");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(read_file(out / "REPORT.md").find("FAILS: RMT is below 0 at 6 segments") != std::string::npos);
  write(dir / "m.yaml", manifest);
  r = rmt_run(base + " --report-only");
  CHECK(read_file(out / "REPORT.md") == written);
  // The length item keeps each evaluation (run id, length): a re-run reads them back instead of
  // evaluating again (shown by a kept accuracy changed by hand).
  int kept = 0;
  for (const auto& e : fs::directory_iterator(dir / "runs/longer/evals")) {
    ++kept;
    if (e.path().filename().string().rfind("rmt-seg3-seed1-", 0) == 0 && e.path().string().find("_8.json") != std::string::npos) {
      nlohmann::json j = nlohmann::json::parse(read_file(e.path()));
      j["acc_teacher_forced"] = 0.125;
      write(e.path(), j.dump());
    }
  }
  CHECK(kept == 4);
  r = rmt_run(base + " longer");
  CHECK(r.status == 0);
  CHECK(read_file(out / "longer/results.csv").find("rmt,6,4,0,1,4,8,3,0.125,") != std::string::npos);
  // An evaluation with samples whose outputs were not finite (as the evaluation that met them
  // keeps it: scored as wrong answers, and counted) is listed under the table with its count.
  for (const auto& e : fs::directory_iterator(dir / "runs/longer/evals"))
    if (e.path().filename().string().rfind("rmt-seg3-seed1-", 0) == 0 && e.path().string().find("_8.json") != std::string::npos) {
      nlohmann::json j = nlohmann::json::parse(read_file(e.path()));
      CHECK(j.at("non_finite_samples") == 0);
      j["non_finite_samples"] = 7;
      write(e.path(), j.dump());
    }
  r = rmt_run(base + " longer");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  {
    const std::string csv_text = read_file(out / "longer/results.csv");
    const size_t row = csv_text.find("rmt,6,4,0,1,4,8,3,0.125,");
    REQUIRE(row != std::string::npos);
    std::istringstream cells(csv_text.substr(row, csv_text.find('\n', row) - row));
    std::string cell;
    for (int k = 0; k <= 10; ++k) std::getline(cells, cell, ',');
    CHECK(cell == "7");  // non_finite_samples, the 11th column
  }
  CHECK(read_file(out / "longer/table.md").find("Samples whose outputs were not finite numbers, scored as wrong "
                                                "answers (in the accuracies above): rmt seed 1 at 6 segments (7 of ")
        != std::string::npos);
  // An evaluation kept by an older rmt, without the count, had only finite outputs (it failed
  // otherwise): read back as none.
  for (const auto& e : fs::directory_iterator(dir / "runs/longer/evals"))
    if (e.path().filename().string().rfind("rmt-seg3-seed1-", 0) == 0 && e.path().string().find("_8.json") != std::string::npos) {
      nlohmann::json j = nlohmann::json::parse(read_file(e.path()));
      j.erase("non_finite_samples");
      j.erase("samples");
      write(e.path(), j.dump());
    }
  r = rmt_run(base + " longer");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(read_file(out / "longer/table.md").find("not finite") == std::string::npos);
  // A failed evaluation kept by an older rmt (which stopped at outputs that are not finite) is
  // refused, naming the way out.
  for (const auto& e : fs::directory_iterator(dir / "runs/longer/evals"))
    if (e.path().filename().string().rfind("rmt-seg3-seed1-", 0) == 0 && e.path().string().find("_8.json") != std::string::npos) {
      nlohmann::json j = nlohmann::json::parse(read_file(e.path()));
      for (const char* key : {"non_finite_samples", "samples", "acc_teacher_forced", "acc_free_running"}) j.erase(key);
      j["non_finite"] = "the loss over 50 samples is -nan: the model's outputs are not finite numbers";
      write(e.path(), j.dump());
    }
  r = rmt_run(base + " longer");
  CHECK(r.status != 0);
  CHECK(r.output.find("kept by an older rmt, which failed on outputs that are not finite") != std::string::npos);
  CHECK(r.output.find("not an evaluation this reproduction wrote") != std::string::npos);
  CHECK(r.output.find("delete it to evaluate again") != std::string::npos);
  for (const auto& e : fs::directory_iterator(dir / "runs/longer/evals"))
    if (e.path().filename().string().rfind("rmt-seg3-seed1-", 0) == 0 && e.path().string().find("_8.json") != std::string::npos)
      fs::remove(e.path());
  r = rmt_run(base + " longer");  // evaluated again
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(read_file(out / "longer/table.md").find("not finite") == std::string::npos);
  CHECK(read_file(out / "longer/table.md").find("- holds: RMT is at most 1 at 6 segments") != std::string::npos);

  // --report-only trains nothing. An unfinished run (its results.json gone) leaves the item in
  // progress; without the runs directory the committed results of the same config are reported;
  // after a change of config they are not (other run ids).
  for (const auto& e : fs::directory_iterator(dir / "runs/tiny"))
    if (e.path().filename().string().rfind("rmt-seg3-seed2-", 0) == 0) fs::remove(e.path() / "results.json");
  r = rmt_run(base + " --report-only");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("sweep:") == std::string::npos);
  CHECK(read_file(out / "REPORT.md").find("*In progress: 5 of 6 runs done;") != std::string::npos);
  // ... and its curve is left out of the learning curves, as of the tables (5 runs before).
  CHECK(read_file(out / "REPORT.md").find("Learning curves of the hardest cell (3 segments; 4 runs,") !=
        std::string::npos);
  CHECK(read_file(out / "tiny/learning_curves.csv").find("rmt,2,3,") == std::string::npos);
  // ... and writes nothing under --runs-dir: given the earlier --out as its runs directory (no
  // runs there; the item's results.csv as kept), it leaves that file whole and reports it.
  const std::string kept_csv = read_file(out / "tiny/results.csv");
  r = rmt_run("reproduce --manifest " + (dir / "m.yaml").string() + " --runs-dir " + out.string() + " --out " +
              (dir / "out2").string() + " --report-only");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(read_file(out / "tiny/results.csv") == kept_csv);
  CHECK(read_file(dir / "out2/REPORT.md").find("*In progress: 5 of 6 runs done;") != std::string::npos);
  fs::remove_all(dir / "runs");
  r = rmt_run(base + " --report-only");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(read_file(out / "REPORT.md").find("(1/1 solved, median step 15)") != std::string::npos);
  CHECK(read_file(out / "REPORT.md").find("*In progress: 5 of 6 runs done;") != std::string::npos);  // as kept
  fs::remove(out / "tiny/tiny_curves_1seg.png");
  write(out / "tiny/tiny_curves_7seg.png", "a failing cell's plot of an earlier report");
  r = rmt_run(base + " --report-only");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(fs::exists(out / "tiny/tiny_curves.png"));  // redrawn from learning_curves.csv
  CHECK(fs::exists(out / "tiny/tiny_curves_1seg.png"));
  CHECK_FALSE(fs::exists(out / "tiny/tiny_curves_7seg.png"));  // no check fails at 7 segments
  std::string sweep = read_file(dir / "tiny.yaml");
  sweep.replace(sweep.find("max_steps: 30"), 13, "max_steps: 31");
  write(dir / "tiny.yaml", sweep);
  r = rmt_run(base + " --report-only");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("holds the results of an earlier config") != std::string::npos);
  CHECK(read_file(out / "REPORT.md").find("*Not run yet: `rmt reproduce tiny`.*") != std::string::npos);
  // ... nor the earlier config's wall time.
  CHECK(read_file(out / "REPORT.md").find("| [tiny](#tiny) | a tiny copy | not run | - |") != std::string::npos);
  expect_error(base + " tiny --report-only", "--report-only rewrites the whole report");
  write(dir / "tiny.yaml", kReproSweep);

  // A damaged timing file is a clear error naming it, not an internal one.
  write(out / "tiny/timing.json", R"Y({"wall_s": "soon", "train_s": 1, "runs": 6, "jobs": 2})Y");
  expect_error(base + " tiny", "timing.json: 'wall_s' is not a number");
  // A fresh start (no run of the item in the runs directory) times itself, not on top of the
  // time an earlier call spent on runs that are gone.
  write(out / "tiny/timing.json", R"Y({"wall_s": 99999, "train_s": 1, "runs": 6, "jobs": 2})Y");
  r = rmt_run(base + " tiny");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const std::string timing = read_file(out / "tiny/timing.json");
  CAPTURE(timing);
  CHECK(nlohmann::json::parse(timing)["wall_s"].get<double>() < 1000);
}

TEST_CASE("reproduce: the report's templates: exact text, and every placeholder and template accounted for") {
  const std::string file = "comment, not a template {{ignored}}\n"
                           "<!-- template: a -->\nHello {{who}}.\n\n"
                           "<!-- template: b -->\nno keys\n";
  const ReportTemplates t = ReportTemplates::parse(file, "t.md", {"a", "b"});
  CHECK(t.render("a", {{"who", "world"}}) == "Hello world.\n\n");  // blank lines kept, value not re-read
  CHECK(t.render("a", {{"who", "{{who}}"}}) == "Hello {{who}}.\n\n");
  CHECK(t.render("b", {}) == "no keys\n");
  auto error = [](auto f) {
    try {
      f();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // A key the template names that the report does not give; one it gives that the template leaves out.
  CHECK(error([&] { t.render("a", {}); }) == "t.md: template 'a': unknown placeholder {{who}} (it can use: )");
  CHECK(error([&] { t.render("b", {{"who", "x"}}); }) ==
        "t.md: template 'b' leaves out {{who}}, which the report needs there");
  CHECK(error([&] { ReportTemplates::parse("<!-- template: a -->\n{{who\n", "t.md", {"a"}).render("a", {{"who", "x"}}); })
            .find("'{{' without its '}}'") != std::string::npos);
  // A template the report needs that the file lacks; one it does not know; one given twice.
  CHECK(error([&] { ReportTemplates::parse(file, "t.md", {"a", "b", "c"}); }) ==
        "t.md: no template 'c' (the report needs: a, b, c)");
  CHECK(error([&] { ReportTemplates::parse(file, "t.md", {"a"}); }) == "t.md:5: unknown template 'b' (templates: a)");
  CHECK(error([&] { ReportTemplates::parse(file + "<!-- template: a -->\n", "t.md", {"a", "b"}); }) ==
        "t.md:7: template 'a' given twice");
  CHECK(error([&] { ReportTemplates::parse("<!-- template: a\n", "t.md", {"a"}); }) ==
        "t.md:1: expected `<!-- template: NAME -->`");
}

TEST_CASE("reproduce: without its report templates beside the manifest, a clear error before any run") {
  fs::path dir = tiny_project("no_templates", manifest_text());
  fs::remove(dir / "report_templates.md");
  const std::string base = "reproduce --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                           (dir / "runs").string() + " --out " + (dir / "out").string();
  expect_error(base, (dir / "report_templates.md").string() + ": not found: the report's templates");
  CHECK_FALSE(fs::exists(dir / "runs"));
  // A template naming a placeholder the report does not fill is refused the same way.
  std::string templates = read_file(fs::path(RMT_SOURCE_DIR) / "experiments/reproduce/report_templates.md");
  templates.replace(templates.find("{{total_time}}"), 14, "{{total}}");
  write(dir / "report_templates.md", templates);
  expect_error(base + " --report-only", "template 'report': unknown placeholder {{total}}");
}

TEST_CASE("reproduce: learning_curves.csv read back names the value out of range") {
  const std::string header = "kind,seed,segments,run_id,step,val_acc,val_segments\n";
  CHECK(parse_curves_csv(header + "rmt,1,6,r1,2000,0.7,6\n", "c.csv").at(0).points.at(0).val_acc == 0.7);
  CHECK(error_of([&] { parse_curves_csv(header + "rmt,1,6,r1,2000,1.5,6\n", "c.csv"); }) ==
        "c.csv: line 2: val_acc 1.5 is out of range (0 to 1)");
  CHECK(error_of([&] { parse_curves_csv(header + "rmt,1,6,r1,-5,0.5,6\n", "c.csv"); }) ==
        "c.csv: line 2: step -5 is out of range (>= 0)");
  CHECK(error_of([&] { parse_curves_csv(header + "rmt,1,0,r1,5,0.5,6\n", "c.csv"); }) ==
        "c.csv: line 2: segments 0 is out of range (>= 1)");
  CHECK(error_of([&] { parse_curves_csv(header + "rmt,1,6,r1,5,0.5,0\n", "c.csv"); }) ==
        "c.csv: line 2: val_segments 0 is out of range (>= 1)");
}

TEST_CASE("reproduce: learning curves say what segments their accuracy was measured at") {
  // A scheduled curriculum (or none) validates at all the run's segments; a mastery one at its stage's.
  LearningCurve scheduled{"rmt", 1, 6, "rmt-seg6-seed1", {{2000, 0.70, 6}, {4000, 0.98, 6}}};
  LearningCurve mastery{"rmt", 1, 6, "rmt-seg6-seed1", {{2000, 0.99, 2}, {4000, 0.50, 4}}};
  CHECK_FALSE(measured_at_stage_segments({scheduled}));
  CHECK(measured_at_stage_segments({scheduled, mastery}));
  CHECK(curves_gnuplot_script({scheduled}, "c.png", "t").find(
            "set ylabel \"validation accuracy (teacher-forced, at all the run's segments)\"") != std::string::npos);
  CHECK(curves_gnuplot_script({mastery}, "c.png", "t").find(
            "set ylabel \"validation accuracy (teacher-forced, at the stage's segments)\"") != std::string::npos);
  // The stage change (2 -> 4 segments at step 4000) is marked; a curve without one has no marks.
  const std::string marked = curves_gnuplot_script({mastery}, "c.png", "t");
  CHECK(marked.find("$stages0 << EOD\n4000 0.5\nEOD\n") != std::string::npos);
  CHECK(marked.find("title 'a curriculum stage begins'") != std::string::npos);
  CHECK(curves_gnuplot_script({scheduled}, "c.png", "t").find("$stages") == std::string::npos);
}

TEST_CASE("reproduce: a language-model setting's seeds are one row (mean, std, range); claims say the spread") {
  auto run = [](const char* model, int cache, double bpc) {
    LmRow r;
    r.model = model;
    r.cache = cache;
    r.bpc = bpc;
    r.loss = bpc * 0.5;
    r.wall_s = 10;
    return r;
  };
  const std::vector<LmRow> rows = lm_means({run("xl", 4, 2.0), run("baseline", 0, 2.5), run("xl", 4, 2.2),
                                            run("xl", 16, 1.9), run("baseline", 0, 2.7)});
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].model == "xl");
  CHECK(rows[0].seeds == 2);
  CHECK(rows[0].bpc == doctest::Approx(2.1));
  CHECK(rows[0].bpc_sd == doctest::Approx(std::sqrt(0.02)));
  CHECK(rows[0].bpc_min == 2.0);
  CHECK(rows[0].bpc_max == 2.2);
  CHECK(rows[1].model == "baseline");
  CHECK(rows[1].loss == doctest::Approx(1.3));
  CHECK(rows[2].seeds == 1);
  CHECK(rows[2].bpc_sd == 0);
  LmClaim claim;
  claim.run = {"xl", 4, -1, std::nullopt};
  claim.below = {"baseline", -1, -1, std::nullopt};
  ClaimResult r = check_lm_claim(claim, rows);
  CHECK(r.state == ClaimResult::holds);  // 2.1 < 2.6
  CHECK(r.detail.find("difference 0.500 larger than the seeds' spread 0.200") != std::string::npos);
  claim.below = {"xl", 16, -1, std::nullopt};
  r = check_lm_claim(claim, rows);
  CHECK(r.state == ClaimResult::fails);  // 2.1 > 1.9
  CHECK(r.detail.find("difference 0.200 within the seeds' spread 0.200") != std::string::npos);
}

TEST_CASE("reproduce: a tiny language-model item (table of runs, bpc plot, claims comparing runs)") {
  fs::path dir = fresh_tmp("rmt_reproduce", "lm");
  copy_report_templates(dir);
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the cat sat on the mat; the dog ate the log. ";
  write(dir / "corpus.txt", text);
  write(dir / "lm.yaml", R"Y(data: {task: text, input: )Y" + (dir / "corpus.txt").string() + R"Y(}
base:
  segment_length: 8
  bptt: 1
  model: {n_layer: 1, n_head: 2, d_head: 8, d_model: 16, d_inner: 32, dropout: 0.0, mem_init: normal}
  train: {batch_size: 4, lr: 1.0e-3, schedule: constant, warmup_steps: 0, clip: 1.0, max_steps: 20,
          eval_every: 20, log_every: 20}
grid:
  - {model.kind: [baseline]}
  - {model.kind: [xl], model.mem_len: [4], train.seed: [1, 2]}
  - {model.kind: [rmt], model.num_mem_tokens: [2], bptt: [0, 1]}
)Y");
  write(dir / "paper.yaml", kPaper);
  write(dir / "m.yaml", R"Y(paper: paper.yaml
items:
  lm:
    kind: lm
    title: "a tiny LM"
    paper_says: "memory helps"
    sweep: lm.yaml
    claims:
      - {text: "RMT is within 100 bpc of the baseline", run: {model: rmt, memory: 2, bptt: 1}, below: {model: baseline}, margin: 100}
      - {text: "the baseline is 100 bpc below Tr-XL", run: {model: baseline}, below: {model: xl, cache: 4}, margin: -100}
      - {text: "an ambiguous selector", run: {model: rmt}, below: {model: baseline}}
      - {text: "a run that does not exist", run: {model: rmt, memory: 3}, below: {model: baseline}}
)Y");
  const std::string base = "reproduce --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                           (dir / "runs").string() + " --out " + (dir / "out").string();
  Run r = rmt_run(base + " -j 2");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  for (const char* f : {"REPORT.md", "lm/results.csv", "lm/table.md", "lm/lm.png", "lm/timing.json"})
    CHECK_MESSAGE(fs::exists(dir / "out" / f), f);
  const std::string table = read_file(dir / "out/lm/table.md");
  CHECK(table.find("| model | cache | memory | BPTT | seeds | test bpc (mean ± std) |") != std::string::npos);
  CHECK(table.find("| xl | 4 | - | - | 2 | ") != std::string::npos);  // its two seeds: one row
  CHECK(table.find("| rmt | - | 2 | 0 | 1 | ") != std::string::npos);
  CHECK(table.find("| rmt | - | 2 | 1 | 1 | ") != std::string::npos);
  const std::string report = read_file(dir / "out/REPORT.md");
  CHECK(report.find("holds: RMT is within 100 bpc of the baseline") != std::string::npos);
  CHECK(report.find("FAILS: the baseline is 100 bpc below Tr-XL") != std::string::npos);
  CHECK(report.find("the seeds' spread") != std::string::npos);  // the claim on xl's two seeds
  CHECK(report.find("no data: an ambiguous selector (test bpc; more than one run matches rmt)") != std::string::npos);
  CHECK(report.find("no data: a run that does not exist (test bpc; no finished run of rmt memory 3)") != std::string::npos);
  CHECK(report.find("1 of 4 checks hold") != std::string::npos);
}

TEST_CASE("reproduce: a bench item times this machine once; --report-only reprints the committed numbers") {
  fs::path dir = fresh_tmp("rmt_reproduce", "bench");
  copy_report_templates(dir);
  write(dir / "paper.yaml", kPaper);
  write(dir / "m.yaml", R"Y(paper: paper.yaml
items:
  diag:
    beyond_the_paper: true
    kind: bench
    title: "diagonal evaluation"
    paper_says: "(not in the paper)"
    notes: "Read from the table above."
    bench: diagonal
    threads: [1, 2]
    layers: 2
    segments: 3
    batch: 2
    reps: 1
    min_speedup: 1000
)Y");
  const std::string base = "reproduce --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                           (dir / "runs").string() + " --out " + (dir / "out").string();
  Run r = rmt_run(base);
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const nlohmann::json results = nlohmann::json::parse(read_file(dir / "out/diag/results.json"));
  REQUIRE(results.at("timings").size() == 2);
  CHECK(results.at("timings")[0].at("threads") == 1);
  CHECK(results.at("timings")[1].at("threads") == 2);
  CHECK(results.at("timings")[1].at("segments") == 3);
  CHECK(results.at("timings")[1].at("identical") == true);  // the two schedules' bits agree
  CHECK(results.at("cpu_model") == cpu_model_name());
  const std::string report = read_file(dir / "out/REPORT.md");
  CHECK(report.find("| 2 | 2 layers x 3 segments of 16, batch 2, d_model 64 |") != std::string::npos);
  // The bound is out of reach: both checks fail, and the summary says so.
  CHECK(report.find("FAILS: diagonal evaluation at least 1000.00x sequential, bit for bit, at 1 threads") !=
        std::string::npos);
  CHECK(report.find("| diagonal evaluation | 0 of 2 checks hold |") != std::string::npos);
  CHECK(report.find("**Reading.** Read from the table above.") != std::string::npos);
  // --report-only times nothing: the numbers of results.json come back unchanged.
  nlohmann::json edited = results;
  edited["timings"][0]["speedup"] = 2000.0;
  write(dir / "out/diag/results.json", edited.dump(2));
  Run again = rmt_run(base + " --report-only");
  CAPTURE(again.output);
  REQUIRE(again.status == 0);
  CHECK(nlohmann::json::parse(read_file(dir / "out/diag/results.json")) == edited);
  const std::string reprinted = read_file(dir / "out/REPORT.md");
  CHECK(reprinted.find("holds: diagonal evaluation at least 1000.00x sequential, bit for bit, at 1 threads") !=
        std::string::npos);
  CHECK(reprinted.find("| diagonal evaluation | 1 of 2 checks hold |") != std::string::npos);
  // A benchmark that does not exist, and a bench item headed as the paper's, are refused.
  write(dir / "m.yaml", read_file(dir / "m.yaml").replace(read_file(dir / "m.yaml").find("bench: diagonal"), 15,
                                                           "bench: sideways"));
  Run bad = rmt_run(base + " --list");
  CHECK(bad.status != 0);
  CHECK(bad.output.find("items.diag.bench: unknown benchmark 'sideways' (benchmarks: diagonal)") != std::string::npos);
}

TEST_CASE("reproduce: a call stopped after some runs keeps their time, and the next adds to it") {
  fs::path dir = tiny_project("stopped", manifest_text());
  const std::string base = "reproduce tiny --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                           (dir / "runs").string() + " --out " + (dir / "out").string() + " -j 1";
  const fs::path timing_file = dir / "out/tiny/timing.json";
  // Killed inside its second write of timing.json (a write has 3 kill points), after its second
  // run: the first write, after the first run, stands.
  setenv(kKillAtWriteEnv, "4:timing.json", 1);
  Run r = rmt_run(base);
  unsetenv(kKillAtWriteEnv);
  CAPTURE(r.output);
  CHECK(r.status != 0);
  REQUIRE(fs::exists(timing_file));
  const nlohmann::json first = nlohmann::json::parse(read_file(timing_file));
  CAPTURE(first.dump());
  CHECK(first["wall_s"].get<double>() > 0);
  CHECK(first["runs"].get<int>() == 6);
  // A report of the item in progress: tables of the finished runs, and no reading computed from
  // them alone (its placeholders would count 2 runs as the whole, or match none and stop it).
  Run partial = rmt_run("reproduce --report-only --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                        (dir / "runs").string() + " --out " + (dir / "out").string());
  REQUIRE_MESSAGE(partial.status == 0, partial.output);
  const std::string report = read_file(dir / "out/REPORT.md");
  CHECK(report.find("*In progress: 2 of 6 runs done") != std::string::npos);
  CHECK(report.find("Written when every run is finished") != std::string::npos);
  CHECK(report.find("runs met the stopping rule; the baseline got") == std::string::npos);
  // The next call trains the rest and adds its own time.
  r = rmt_run(base);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const nlohmann::json second = nlohmann::json::parse(read_file(timing_file));
  CAPTURE(second.dump());
  CHECK(second["wall_s"].get<double>() > first["wall_s"].get<double>());
  CHECK(second["train_s"].get<double>() >= first["train_s"].get<double>());  // 0.1 s rounding
}

TEST_CASE("reproduce: finished runs' records let another machine continue an item without training them again") {
  // Only the sweep item: no attention or length item reads its runs' checkpoints.
  const std::string text = manifest_text();
  fs::path dir = tiny_project("records", text.substr(0, text.find("  maps:")));
  const std::string base = "reproduce tiny --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                           (dir / "runs").string() + " --out " + (dir / "out").string() + " -j 2";
  Run r = rmt_run(base);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const fs::path records = dir / "out/tiny/runs";
  std::vector<fs::path> kept;
  for (const auto& e : fs::directory_iterator(records)) kept.push_back(e.path());
  REQUIRE(kept.size() == 6);
  for (const auto& record : kept) {
    for (const char* f : {"config.yaml", "metrics.jsonl", "results.json"}) CHECK_MESSAGE(fs::exists(record / f), f);
    CHECK_FALSE(fs::exists(record / "best.safetensors"));  // no checkpoints
    CHECK(read_file(record / "results.json") == read_file(dir / "runs/tiny" / record.filename() / "results.json"));
  }
  const std::string csv = read_file(dir / "out/tiny/results.csv");
  const std::string report = read_file(dir / "out/REPORT.md");

  // Another machine (no runs directory): every run is restored, none trained; the same results.
  fs::remove_all(dir / "runs");
  r = rmt_run(base);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("tiny: 6 finished runs restored from their records") != std::string::npos);
  CHECK(r.output.find("all 6 runs done") != std::string::npos);
  CHECK(read_file(dir / "out/tiny/results.csv") == csv);
  CHECK(read_file(dir / "out/REPORT.md").find("(2/2 solved, median step 30)") != std::string::npos);
  CHECK(report.find("(2/2 solved, median step 30)") != std::string::npos);

  // A record cut short (no results.json) is not a finished run: that run alone is trained again,
  // and its record is written whole.
  fs::remove_all(dir / "runs");
  fs::remove(kept[0] / "results.json");
  r = rmt_run(base);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("tiny: 5 finished runs restored") != std::string::npos);
  CHECK(r.output.find("1 of 6 runs to do") != std::string::npos);
  CHECK(fs::exists(kept[0] / "results.json"));
  CHECK(read_file(dir / "out/tiny/results.csv").size() == csv.size());
  // A run directory already here is left as it is (in progress, failed or finished).
  r = rmt_run(base);
  CHECK(r.status == 0);
  CHECK(r.output.find("restored") == std::string::npos);
}

TEST_CASE("reproduce --device: every run trains there, in directories of its own, and the report names the device") {
  const std::string text = manifest_text();
  fs::path dir = tiny_project("device", text.substr(0, text.find("  maps:")));
  // On the CPU, as committed.
  Run r = rmt_run("reproduce tiny --manifest " + (dir / "m.yaml").string() + " --runs-dir " + (dir / "runs").string() +
                  " --out " + (dir / "out").string() + " -j 2");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  // On another device (the checked CPU backend stands in for a GPU), from the project's root:
  // --runs-dir and --out default to the CPU's with the device's name added.
  const std::string cmd = "cd " + dir.string() + " && " + RMT_BINARY +
                          " reproduce tiny --manifest m.yaml -j 2 --device cpu-guarded > device.log 2>&1";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, read_file(dir / "device.log"));
  const fs::path runs = dir / "runs/reproduce-cpu-guarded/tiny", out = dir / "experiments/results-cpu-guarded";
  REQUIRE(fs::exists(out / "REPORT.md"));
  CHECK_FALSE(fs::exists(dir / "experiments/results"));
  const CsvTable cpu = parse_csv(read_file(dir / "out/tiny/results.csv"), "cpu");
  const CsvTable other = parse_csv(read_file(out / "tiny/results.csv"), "device");
  REQUIRE(cpu.rows.size() == 6);
  REQUIRE(other.rows.size() == 6);
  // Other runs (other RUN_IDs), each trained on the device, none of the CPU's.
  std::set<std::string> cpu_ids;
  for (const auto& row : cpu.rows) cpu_ids.insert(row[size_t(cpu.column("run_id"))]);
  for (const auto& row : other.rows) {
    const std::string id = row[size_t(other.column("run_id"))];
    CHECK(cpu_ids.count(id) == 0);
    const auto results = nlohmann::json::parse(read_file(runs / id / "results.json"));
    CHECK(results["device"] == "cpu-guarded");
  }
  const std::string report = read_file(out / "REPORT.md");
  CHECK(report.find("The runs trained on device `cpu-guarded` (the CPU backend with its checks)") != std::string::npos);
  CHECK(read_file(dir / "out/REPORT.md").find("The runs trained on device") == std::string::npos);
  CHECK(report.find("(2/2 solved") != std::string::npos);  // the same tables, from its own runs
  CHECK(report.find("Command: `rmt reproduce tiny --device cpu-guarded` (= `rmt sweep") != std::string::npos);
  // --report-only trains nothing, and may run where the device is absent: it does not describe
  // this machine's device as the one the runs trained on (it said "no CUDA device").
  const std::string report_only = "cd " + dir.string() + " && " + RMT_BINARY +
                                  " reproduce --manifest m.yaml --report-only --device cuda > cuda.log 2>&1";
  REQUIRE_MESSAGE(std::system(report_only.c_str()) == 0, read_file(dir / "cuda.log"));
  const std::string cuda_report = read_file(dir / "experiments/results-cuda/REPORT.md");
  CHECK(cuda_report.find("The runs trained on device `cuda`, with this machine's cores") != std::string::npos);
  CHECK(cuda_report.find(rmt::cuda_description()) == std::string::npos);
}
