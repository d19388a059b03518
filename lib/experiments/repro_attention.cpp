// The attention items of `rmt reproduce` (docs/paper.md §4, Figures 6 and 8): the measures of
// attention_readings.h over every seed of the chosen cells of a sweep item and many test
// samples (results.csv, one row per run), tabulated per measure over the seeds and checked
// against the item's claims; one map per cell drawn for the eye.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/experiments/attention_map.h"
#include "lib/experiments/attention_readings.h"
#include "lib/experiments/repro_claims.h"
#include "lib/experiments/repro_items.h"
#include "lib/files/io.h"
#include "lib/run/eval_run.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

// Per run, what compute measured (the tables come from results.csv; these details do not).
constexpr const char* kRunsFile = "runs.md";

class AttentionHandler : public FromItemHandler {
 public:
  AttentionHandler(const ReproItem& item, ReproContext& context)
      : FromItemHandler(item, context, "measuring attention maps", "maps.md"), part_(std::get<AttentionItem>(item.part)) {}

 private:
  const AttentionItem& part_;
  void compute() const override;
  // The tables and checks from results.csv (so that --report-only checks the claims as they are now).
  void summarise() override;
  std::string reading_metric() const override { return part_.measures.front(); }
  // Why results.csv is not of this config ("" when it is): a run that is not one of its cells'
  // (a sweep or a cell changed), or another number of samples.
  std::string other_config(const CsvTable& table) const;
  // The runs of a pick's cell (its model and segments), in seed order.
  std::vector<const SweepRun*> cell_runs(const ReproItem& from, const RunPick& pick, size_t i) const;
  // One run: its measures (a results.csv row and its lines of runs.md), and its map when drawn.
  std::string measure_run_into(const SweepRun& run, const RunPick& pick, bool draw, std::string& csv) const;
};

std::string number_or_empty(double v, bool defined) { return defined ? fmt::format("{:.6g}", v) : ""; }

std::string csv_header() {
  std::string h = "run_id,model.kind,segments,model.num_mem_tokens,model.mem_len,train.seed,segment_length,samples";
  for (const std::string& m : attention_measure_names()) h += fmt::format(",{0},{0}_sd,{0}_layer,{0}_head", m);
  return h + ",status\n";
}

std::vector<const SweepRun*> AttentionHandler::cell_runs(const ReproItem& from, const RunPick& pick, size_t i) const {
  std::vector<const SweepRun*> runs;
  for (const SweepRun& run : ctx_.plan_of(from).runs)
    if (run.config.model.kind == pick.model && run.config.segments == pick.segments) runs.push_back(&run);
  if (runs.empty())
    fail("{}: items.{}.runs[{}]: sweep item {} has no {} run at {} segments", ctx_.manifest.path, item_.name, i,
         from.name, pick.model, pick.segments);
  std::stable_sort(runs.begin(), runs.end(),
                   [](const SweepRun* a, const SweepRun* b) { return a->config.train.seed < b->config.train.seed; });
  return runs;
}

std::string AttentionHandler::measure_run_into(const SweepRun& run, const RunPick& pick, bool draw,
                                               std::string& csv) const {
  TrainedRun trained = load_trained_run(run.dir.string(), "best");
  const SampleSplit split = load_sample_split(trained.run.config.data, trained.run.meta, "test");
  const SampleLayout layout = sample_layout(trained.run.meta);
  if (part_.samples > split.n)
    fail("items.{}.samples: {} is beyond the test split of {} ({} samples)", item_.name, part_.samples, run.run_id, split.n);
  if (pick.sample >= split.n) fail("{}: sample {} is beyond the test split ({} samples)", item_.name, pick.sample, split.n);
  auto maps_of = [&](int sample) {
    return compute_attention_maps(*trained.model, trained.run.meta.vocab,
                                  split.input.data() + int64_t(sample) * split.seq_len, split.seq_len,
                                  trained.run.seg_len);
  };
  std::vector<AttentionMaps> samples;
  for (int k = 0; k < part_.samples; ++k) samples.push_back(maps_of(k));
  const std::vector<RunMeasure> measures = measure_run(samples, layout, attention_measure_names());

  const Config& c = run.config;
  const int segment_length = *std::max_element(trained.run.seg_len.begin(), trained.run.seg_len.end());
  csv += fmt::format("{},{},{},{},{},{},{},{}", run.run_id, c.model.kind, c.segments, c.model.num_mem_tokens,
                     c.model.mem_len, c.train.seed, segment_length, part_.samples);
  for (const RunMeasure& m : measures) {
    const bool pooled = m.layer < 0;  // over every layer and head: "all" in both columns
    csv += fmt::format(",{},{},{},{}", number_or_empty(m.mean, m.defined), number_or_empty(m.sd, m.defined),
                       !m.defined ? "" : pooled ? "all" : std::to_string(m.layer),
                       !m.defined ? "" : pooled ? "all" : std::to_string(m.head));
  }
  csv += ",done\n";

  // Its line of runs.md: the item's measures, mean ± sd over the samples at the chosen head, and
  // the rewrite measures segment by segment (whether the rewriting grows with the segments).
  std::string md = fmt::format("- {} (seed {}):", run.run_id, c.train.seed);
  std::string by_segment;
  for (const std::string& name : part_.measures) {
    const RunMeasure& m = *std::find_if(measures.begin(), measures.end(), [&](const RunMeasure& x) { return x.name == name; });
    if (!m.defined) continue;
    md += fmt::format(" {} {:.3f} ± {:.3f} ({});", name, m.mean, m.sd,
                      m.layer < 0 ? "every layer and head" : fmt::format("layer {}, head {}", m.layer, m.head));
    if (name.rfind("rewrite_", 0) != 0) continue;
    std::string values;
    for (size_t s = 0; s < m.per_segment.size(); ++s)
      if (std::isfinite(m.per_segment[s])) values += fmt::format("{}{}: {:.2f}", values.empty() ? "" : ", ", s, m.per_segment[s]);
    by_segment += fmt::format("  {} by segment: {}\n", name, values);
  }
  md.back() = '\n';
  md += by_segment;
  if (draw) {
    const AttentionMaps maps = pick.sample < part_.samples ? std::move(samples[size_t(pick.sample)]) : maps_of(pick.sample);
    const int nseg = int(maps.segments.size());
    if (pick.segment >= nseg) fail("{}: segment {} is beyond the run's {} segments", item_.name, pick.segment, nseg);
    AttentionSelection sel;
    if (pick.segment >= 0) sel.segments = {pick.segment};
    else for (int s = 0; s < nseg; ++s) sel.segments.push_back(s);
    for (int l = 0; l < maps.layers; ++l) sel.layers.push_back(l);
    for (int h = 0; h < maps.heads; ++h) sel.heads.push_back(h);
    const std::string stem = fmt::format("{}_{}seg_seed{}", pick.model, pick.segments, c.train.seed);
    const fs::path png = ctx_.out_dir(item_) / (stem + ".png");
    const std::string title = fmt::format("{} - {}, {} segments, test sample {}", item_.title, pick.model,
                                          pick.segments, pick.sample);
    write_file_atomic(png, run_gnuplot(attention_gnuplot_script(maps, sel, "png", title)));
    md = fmt::format("\n![{}]({}/{})\n\n", stem, item_.name, png.filename().string()) + md;
  }
  return md;
}

void AttentionHandler::compute() const {
  const ReproItem& from = *ctx_.manifest.find(item_.from);
  const fs::path dir = ctx_.out_dir(item_);
  create_directories_or_fail(dir);
  std::string csv = csv_header(), md;
  for (size_t i = 0; i < part_.runs.size(); ++i) {
    const RunPick& p = part_.runs[i];
    const std::vector<const SweepRun*> runs = cell_runs(from, p, i);
    // The drawn map's run: the seed named, else the cell's lowest.
    const SweepRun* drawn = p.seed_given ? ctx_.pick_run(from, p, fmt::format("items.{}.runs[{}]", item_.name, i)) : runs.front();
    md += fmt::format("**{} at {} segments** ({} runs; the map: seed {}, test sample {}):\n", p.model, p.segments,
                      runs.size(), drawn->config.train.seed, p.sample);
    for (const SweepRun* run : runs) {
      if (run_state(*run) != RunState::done) {
        md += fmt::format("- {}: not trained yet (`{}`)\n", run->run_id, ctx_.command_of(from));
        continue;
      }
      md += measure_run_into(*run, p, run == drawn, csv);
    }
    md += "\n";
  }
  write_file_atomic(dir / "results.csv", csv);
  write_file_atomic(dir / kRunsFile,
                    fmt::format("Per run: each measure's mean ± standard deviation over the first {} test samples, "
                                "at the layer and head chosen on them (docs/reproduction.md).\n\n{}",
                                part_.samples, md));
}

void AttentionHandler::summarise() {
  const fs::path dir = ctx_.out_dir(item_), results = dir / "results.csv";
  if (!primary_there(results)) return;  // not computed yet: the section says so
  const CsvTable table = parse_csv(read_file(results), results.string());
  if (!this_config(results, other_config(table))) return;
  std::string md;
  std::map<std::string, Pivot> pivots;
  for (const std::string& measure : part_.measures) {
    // The runs it is defined for (a model without a write memory or a cache leaves it empty).
    CsvTable defined = table;
    const size_t c = size_t(table.column(measure));
    defined.rows.clear(), defined.row_lines.clear();
    for (size_t r = 0; r < table.rows.size(); ++r)
      if (c < table.header.size() && !table.rows[r][c].empty())
        defined.rows.push_back(table.rows[r]), defined.row_lines.push_back(table.row_lines[r]);
    Pivot pivot = pivot_results(defined, measure, {}, results.string());
    if (pivot.rows.empty()) continue;  // defined for none of these models
    md += fmt::format("`{}`: {}; mean ± standard deviation over the seeds (each seed's value: its mean over the "
                      "samples).\n\n{}\n", measure, attention_measure_definition(measure), format_pivot(pivot, "md"));
    pivots.emplace(measure, std::move(pivot));
  }
  std::vector<ClaimResult> checks;
  for (const Claim& claim : part_.claims) {
    const auto pivot = pivots.find(claim.metric);
    if (pivot != pivots.end()) {
      checks.push_back(check_claim(claim, pivot->second, ctx_.manifest.tolerance));
    } else {
      checks.emplace_back();
      checks.back().detail = fmt::format("no run with a value of {}", claim.metric);
    }
  }
  // The paper gives no numbers for its maps: the checks are the project's own bounds.
  if (!checks.empty()) md += claims_markdown(claim_lines(part_.claims), checks, true) + "\n";
  if (fs::exists(dir / kRunsFile)) md += read_file(dir / kRunsFile);
  write_file_atomic(dir / "maps.md", md);
  found_results(checks);
}

std::string AttentionHandler::other_config(const CsvTable& table) const {
  const ReproItem& from = *ctx_.manifest.find(item_.from);
  std::set<std::string> ids;  // every seed of each cell
  for (size_t i = 0; i < part_.runs.size(); ++i)
    for (const SweepRun* run : cell_runs(from, part_.runs[i], i)) ids.insert(run->run_id);
  const int c_id = table.column("run_id"), c_samples = table.column("samples");
  if (c_id < 0 || c_samples < 0) return "no run_id or samples column";
  for (const auto& row : table.rows) {
    if (!ids.count(row[size_t(c_id)]))
      return fmt::format("run {} is none of the runs of its cells in {}", row[size_t(c_id)], item_.from);
    if (row[size_t(c_samples)] != std::to_string(part_.samples))
      return fmt::format("measured over {} samples, not {}", row[size_t(c_samples)], part_.samples);
  }
  return "";
}

}  // namespace

std::unique_ptr<ItemHandler> make_attention_handler(const ReproItem& item, ReproContext& context) {
  return std::make_unique<AttentionHandler>(item, context);
}

}  // namespace rmt
