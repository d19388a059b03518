// rmt reproduce: a whole tiny reproduction through the CLI (sweep, attention maps, length
// generalisation, REPORT.md, resume), then a re-run that trains nothing.
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/core/provenance.h"
#include "lib/experiments/results_table.h"
#include "lib/files/io.h"
#include "tests/cli.h"
#include "tests/reproduce_project.h"

using namespace rmt;

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
  CHECK(report.find("holds: the baseline is below 0.99") != std::string::npos);
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
  CHECK(read_file(out / "longer/table.md").find("- holds: RMT is below 0.99 at 6 segments") != std::string::npos);
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
  const std::string claim = "RMT is below 0.99 at 6 segments\", model: rmt, segments: [6], max: 0.99";
  changed.replace(changed.find(claim), claim.size(), "RMT is below 0.01 at 6 segments\", model: rmt, segments: [6], max: 0.01");
  write(dir / "m.yaml", changed);
  r = rmt_run(base + " --report-only");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(read_file(out / "REPORT.md").find("FAILS: RMT is below 0.01 at 6 segments") != std::string::npos);
  // An item whose config changed after its results were written is not run, its results not
  // reprinted as its own (issue 58): the length item at other lengths, the attention item over
  // other samples.
  changed = manifest;
  changed.replace(changed.find("lengths: [4, 8]"), 15, "lengths: [4, 12]");
  changed.replace(changed.find("samples: 5"), 10, "samples: 4");
  write(dir / "m.yaml", changed);
  r = rmt_run(base + " --report-only");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("(length 8 is not one of the item's lengths); not reported") != std::string::npos);
  CHECK(r.output.find("(measured over 5 samples, not 4); not reported") != std::string::npos);
  CHECK(read_file(out / "REPORT.md").find("| [longer](#longer) | length | not run |") != std::string::npos);
  CHECK(read_file(out / "REPORT.md").find("| [maps](#maps) | attention | not run |") != std::string::npos);
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
  CHECK(read_file(out / "longer/table.md").find("- holds: RMT is below 0.99 at 6 segments") != std::string::npos);

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
