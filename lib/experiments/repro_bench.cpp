// The bench items of `rmt reproduce` (repro_manifest.h): a benchmark of this machine at each of
// the item's thread counts, kept in results.json (with the machine, the build and the commit)
// so that --report-only reprints the committed numbers instead of timing another machine; a
// table of them and the check of the project's bound on the speed-up at each thread count.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "build_info.h"
#include "lib/core/backend.h"
#include "lib/core/error.h"
#include "lib/core/provenance.h"
#include "lib/experiments/bench.h"
#include "lib/experiments/repro_claims.h"
#include "lib/experiments/repro_items.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

class BenchHandler : public FromItemHandler {
 public:
  BenchHandler(const ReproItem& item, ReproContext& context)
      : FromItemHandler(item, context, "timing", "table.md"), part_(std::get<BenchItem>(item.part)) {}

 private:
  const BenchItem& part_;
  void compute() const override;
  // The table and checks from results.json (so that --report-only checks the bound as it is now).
  void summarise() override;
  std::string section(const ItemTiming& timing) const override;
  // Why results.json is not of this config ("" when it is): another benchmark, other thread
  // counts, or another shape (layers, segments, batch, reps).
  std::string other_config(const json& results) const;
};

// One timing per thread count, each `rmt bench --diagonal` with the item's shape.
void BenchHandler::compute() const {
  const int threads_before = num_threads();
  json timings = json::array();
  for (int threads : part_.threads) {
    ctx_.log(fmt::format("{}: {} layers x {} segments, batch {}, {} threads", item_.name, part_.layers,
                         part_.segments, part_.batch, threads));
    set_num_threads(threads);
    DiagonalBenchOptions o;
    o.layers = part_.layers;
    o.segments = part_.segments;
    o.batch = part_.batch;
    o.reps = part_.reps;
    timings.push_back(json::parse(diagonal_bench_json(run_diagonal_bench(o))));
  }
  set_num_threads(threads_before);
  json results = {{"bench", part_.bench}, {"git_commit", RMT_GIT_COMMIT}, {"timings", timings}};
  add_provenance(results);
  create_directories_or_fail(ctx_.out_dir(item_));
  write_file_atomic(ctx_.out_dir(item_) / "results.json", results.dump(2) + "\n");
}

void BenchHandler::summarise() {
  const fs::path dir = ctx_.out_dir(item_);
  const fs::path file = dir / "results.json";
  if (!primary_there(file)) return;
  std::string md;
  std::vector<ClaimResult> results;
  try {
    const json r = json::parse(read_file(file));
    if (!this_config(file, other_config(r))) return;
    md += fmt::format("Measured on {} ({}), build {} {} {}, commit {}.\n\n", r.at("cpu_model").get<std::string>(),
                      r.at("vector_extensions").get<std::string>(), r.at("compiler").get<std::string>(),
                      r.at("build_flags").get<std::string>(), r.at("gemm").get<std::string>(),
                      r.at("git_commit").get<std::string>());
    md += "| threads | shape | sequential tokens/s | diagonal tokens/s | speed-up | bit-identical |\n"
          "|---|---|---|---|---|---|\n";
    std::vector<ClaimLine> lines;
    for (const json& t : r.at("timings")) {
      const double speedup = t.at("speedup").get<double>();
      const int threads = t.at("threads").get<int>();
      md += fmt::format("| {} | {} layers x {} segments of {}, batch {}, d_model {} | {:.0f} | {:.0f} | {:.2f}x | {} |\n",
                        threads, t.at("layers").get<int>(), t.at("segments").get<int>(),
                        t.at("segment_length").get<int>(), t.at("batch").get<int>(), t.at("d_model").get<int>(),
                        t.at("sequential_tokens_per_s").get<double>(), t.at("diagonal_tokens_per_s").get<double>(),
                        speedup, t.at("identical").get<bool>() ? "yes" : "NO");
      ClaimResult c;
      c.state = speedup >= part_.min_speedup && t.at("identical").get<bool>() ? ClaimResult::holds : ClaimResult::fails;
      c.detail = fmt::format("{:.2f}x at {} threads (needs >= {:.2f}x and the same bits)", speedup, threads,
                             part_.min_speedup);
      lines.push_back({fmt::format("diagonal evaluation at least {:.2f}x sequential, bit for bit, at {} threads",
                                   part_.min_speedup, threads),
                       "tokens/s"});
      results.push_back(c);
    }
    md += fmt::format("\n(medians of {} timed evaluations of each schedule, alternating)\n\n",
                      r.at("timings").at(0).at("reps").get<int>());
    md += claims_markdown(lines, results, item_.beyond_the_paper) + "\n";
  } catch (const json::exception& e) {
    fail("{}: not the results `rmt reproduce {}` writes ({}); run the item again", file.string(), item_.name, e.what());
  }
  write_file_atomic(dir / "table.md", md);
  found_results(results);
}

std::string BenchHandler::other_config(const json& r) const {
  if (r.at("bench").get<std::string>() != part_.bench) return fmt::format("bench {}", r.at("bench").get<std::string>());
  const json& timings = r.at("timings");
  std::vector<int> threads;
  for (const json& t : timings) threads.push_back(t.at("threads").get<int>());
  if (threads != part_.threads) return fmt::format("at threads {}, not {}", fmt::join(threads, ", "), fmt::join(part_.threads, ", "));
  for (const json& t : timings) {
    const int layers = t.at("layers").get<int>(), segments = t.at("segments").get<int>(),
              batch = t.at("batch").get<int>(), reps = t.at("reps").get<int>();
    if (layers != part_.layers || segments != part_.segments || batch != part_.batch || reps != part_.reps)
      return fmt::format("{} layers x {} segments, batch {}, {} reps; the item times {} x {}, batch {}, {} reps", layers,
                         segments, batch, reps, part_.layers, part_.segments, part_.batch, part_.reps);
  }
  return "";
}

std::string BenchHandler::section(const ItemTiming& timing) const {
  const ReportTemplates& t = ctx_.templates;
  const std::string command = ctx_.command_of(item_);
  std::string s = t.render("bench_item", {{"command", command}});
  s += has_results_ ? read_file(ctx_.out_dir(item_) / "table.md") + "\n" : t.render("not_run", {{"command", command}});
  s += ctx_.reading(item_, ReadingData());
  if (timing.wall_s > 0) s += t.render("wall_time", {{"wall", seconds_text(timing.wall_s)}});
  return s;
}

}  // namespace

std::unique_ptr<ItemHandler> make_bench_handler(const ReproItem& item, ReproContext& context) {
  return std::make_unique<BenchHandler>(item, context);
}

}  // namespace rmt
