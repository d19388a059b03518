// rmt reproduce without training: the manifest reader (bad manifests refused naming the file,
// the item and the reason), the report's templates, learning_curves.csv read back and the
// curves' labels, and a language-model setting's seeds as one row with claims on their spread.
#include <doctest/doctest.h>

#include <cmath>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lib/experiments/learning_curves.h"
#include "lib/experiments/repro_claims.h"
#include "lib/experiments/repro_manifest.h"
#include "lib/experiments/repro_templates.h"
#include "lib/files/io.h"
#include "tests/cli.h"
#include "tests/reproduce_project.h"

using namespace rmt;

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
  no_bound.replace(no_bound.find(", max: 0.99"), 11, "");
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

