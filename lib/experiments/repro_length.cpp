// The length items of `rmt reproduce` (repro_length.h): their datasets, their evaluations, and
// the item's table, plot and checks.
#include "lib/experiments/repro_length.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "build_info.h"
#include "lib/core/backend.h"
#include "lib/core/provenance.h"
#include "lib/core/error.h"
#include "lib/experiments/generated_data.h"
#include "lib/experiments/repro_claims.h"
#include "lib/experiments/repro_items.h"
#include "lib/experiments/results_table.h"
#include "lib/files/io.h"
#include "lib/run/eval_run.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A data option's value as the integer type `rmt generate` reads it (the sweep file's check,
// sweep_spec.cpp, has already refused anything else).
template <class Int>
Int option_value(const std::string& key, const std::string& text) {
  Int v = 0;
  const char* begin = text.data() + (!text.empty() && text[0] == '+');
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, v);
  if (text.empty() || ec != std::errc() || ptr != end) fail("data option {}: '{}' is not an integer", key, text);
  return v;
}

// The `rmt generate` request of the sweep's data options with length L, into `dir`.
GenerateRequest length_generate_request(const std::map<std::string, std::string>& data, int length,
                                        const fs::path& dir) {
  TaskArgs a;
  a.length = length;
  std::optional<int64_t> test;
  uint64_t seed = 0;
  std::string task;
  for (const auto& [k, v] : data) {
    if (k == "task") task = v;
    else if (k == "length" || k == "train" || k == "val") continue;  // the item's length; one sample each
    else if (k == "test") test = option_value<int64_t>(k, v);
    else if (k == "seed") seed = option_value<uint64_t>(k, v);
    else if (const TaskOptionInfo* o = find_task_option(k); o && o->arg) a.*o->arg = option_value<int>(k, v);
    else if (o && o->arg_text) a.*o->arg_text = v;
    else fail("data option '{}' is not one of a task of samples at another length (task {})", k, task);
  }
  GenerateRequest r;
  r.task = resolve_task(task, a);
  r.sizes = default_split_sizes(r.task);
  r.sizes.train = 1;
  r.sizes.val = 1;
  if (test) r.sizes.test = *test;
  r.seed = seed;
  r.out_dir = dir.string();
  r.force = true;  // a directory without meta.yaml is an interrupted generation
  return r;
}

}  // namespace

fs::path length_dataset(const fs::path& data_root, const std::map<std::string, std::string>& data, int length) {
  const auto task = data.find("task");
  const std::string task_name = task == data.end() ? "" : task->second;
  const fs::path dir = data_root / fmt::format("{}{}", task_name, length);
  if (fs::exists(dir / "meta.yaml")) {  // generated before: the same options (a changed sweep file)?
    // The `rmt generate` arguments that would write it, as check_generated_dataset reads them.
    std::vector<std::string> args = {"generate", task_name, "--length", std::to_string(length), "--train", "1",
                                     "--val", "1"};
    for (const auto& [k, v] : data)
      if (k != "task" && k != "length" && k != "train" && k != "val") args.insert(args.end(), {generate_flag(k), v});
    check_generated_dataset(dir, args);
    return dir;
  }
  try {
    const GenerateRequest request = length_generate_request(data, length, dir);
    create_directories_or_fail(dir);
    generate_dataset(request);
  } catch (const Error& e) {
    fail("generating {} failed: {}", dir.string(), e.what());
  }
  return dir;
}

namespace {

void write_kept(const fs::path& kept, const std::string& run_id, const fs::path& data_dir, const LengthEval& e) {
  json j = {{"run_id", run_id}, {"data", data_dir.string()}, {"segments", e.segments},
            {"segment_length", e.segment_length}, {"seconds", e.seconds},
            {"acc_teacher_forced", e.acc_teacher_forced}, {"acc_free_running", e.acc_free_running},
            {"samples", e.samples}, {"non_finite_samples", e.non_finite_samples}, {"git_commit", e.git_commit},
            {"device", e.device}, {"cpu_model", e.cpu_model}, {"vector_extensions", e.vector_extensions},
            {"build", e.build}};
  create_directories_or_fail(kept.parent_path());
  write_file_atomic(kept, j.dump(2) + "\n");
}

LengthEval read_kept(const fs::path& kept) {
  LengthEval e;
  try {
    const json j = json::parse(read_file(kept));
    e.segments = j.at("segments").get<int>();
    e.segment_length = j.at("segment_length").get<int>();
    e.seconds = j.at("seconds").get<double>();
    if (j.contains("non_finite"))
      fail("kept by an older rmt, which failed on outputs that are not finite instead of counting them");
    e.acc_teacher_forced = j.at("acc_teacher_forced").get<double>();
    e.acc_free_running = j.at("acc_free_running").get<std::string>();
    // Kept by an older rmt without these: every output was finite (it failed otherwise).
    e.samples = j.value("samples", int64_t(0));
    e.non_finite_samples = j.value("non_finite_samples", int64_t(0));
    for (auto [key, field] : {std::pair{"git_commit", &e.git_commit}, {"device", &e.device}, {"cpu_model", &e.cpu_model},
                              {"vector_extensions", &e.vector_extensions}, {"build", &e.build}})
      *field = j.value(key, std::string("unknown"));
  } catch (const std::exception& ex) {
    fail("{}: not an evaluation this reproduction wrote ({}); delete it to evaluate again", kept.string(), ex.what());
  }
  return e;
}

// `rmt eval --split test --threads 1 --count-non-finite` of one job, kept.
LengthEval evaluate_and_keep(const LengthEvalJob& job) {
  EvalRunRequest req;
  req.run_dir = job.run->dir.string();
  req.data_dir = job.data_dir.string();
  req.split = "test";
  req.threads = 1;
  req.count_non_finite = true;
  req.segment_length = job.segment_length;
  LengthEval e;
  const auto t0 = std::chrono::steady_clock::now();
  const EvalRunResult r = evaluate_run(req);
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  e.segments = int(r.seg_len.size());
  e.segment_length = *std::max_element(r.seg_len.begin(), r.seg_len.end());
  e.acc_teacher_forced = r.result.acc_teacher_forced;
  if (r.result.acc_free_running) e.acc_free_running = fmt::format("{}", *r.result.acc_free_running);
  e.samples = r.result.samples;
  e.non_finite_samples = r.result.non_finite_samples;
  e.git_commit = RMT_GIT_COMMIT;
  e.device = job.run->config.device;  // evaluate_run's backend: the run's own
  std::map<std::string, std::string> made;
  for (const auto& [key, value] : provenance()) made[key] = value;
  e.cpu_model = made["cpu_model"];
  e.vector_extensions = made["vector_extensions"];
  e.build = fmt::format("{} {}; {}", made["compiler"], made["build_flags"], made["gemm"]);
  write_kept(job.kept, job.run->run_id, job.data_dir, e);
  return e;
}

}  // namespace

std::vector<LengthEval> evaluate_lengths(const std::vector<LengthEvalJob>& jobs, int parallel) {
  std::vector<LengthEval> evals(jobs.size());
  std::vector<size_t> pending;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (fs::exists(jobs[i].kept)) evals[i] = read_kept(jobs[i].kept);
    else pending.push_back(i);
  }
  // Each evaluation sets its thread's count to one (evaluate_run); the caller's is put back after.
  const int threads_before = num_threads();
  std::atomic<size_t> next{0};
  std::vector<std::string> errors(pending.size());
  auto work = [&] {
    for (size_t k; (k = next++) < pending.size();) {
      const LengthEvalJob& job = jobs[pending[k]];
      try {
        evals[pending[k]] = evaluate_and_keep(job);
      } catch (const std::exception& e) {
        errors[k] = fmt::format("evaluating {} on {}: {}", job.run->run_id, job.data_dir.string(), e.what());
      }
    }
  };
  const int workers = std::min<int>(parallel, int(pending.size()));
  if (workers <= 1) {
    work();
  } else {
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) threads.emplace_back(work);
    for (std::thread& t : threads) t.join();
  }
  set_num_threads(threads_before);
  for (const std::string& error : errors)
    if (!error.empty()) fail("{}", error);
  return evals;
}

namespace {

// A length item: results.csv like a sweep's (one row per run and evaluated length), a table per
// accuracy, a plot, and the checks on the teacher-forced one (checks.json for the summary).
class LengthHandler : public FromItemHandler {
 public:
  LengthHandler(const ReproItem& item, ReproContext& context)
      : FromItemHandler(item, context, "evaluating on longer data", "table.md"), part_(std::get<LengthItem>(item.part)) {}

 private:
  const LengthItem& part_;
  void compute() const override;
  // Its tables, plot and checks from the results.csv that compute wrote (so that --report-only
  // checks the manifest's claims as they are now, without evaluating again).
  void summarise() override;
  // Why results.csv is not of this config ("" when it is): an evaluation of a run the item does
  // not pick, at a length it does not give, or of a run its sweep item's results do not hold (a
  // sweep whose config changed has other runs).
  std::string other_config(const CsvTable& table) const;
  std::string length_results() const override {
    return has_results_ ? (ctx_.out_dir(item_) / "results.csv").string() : "";
  }
};

void LengthHandler::compute() const {
  const ReproItem& from = *ctx_.manifest.find(item_.from);
  const SweepPlan& plan = ctx_.plan_of(from);
  const fs::path dir = ctx_.out_dir(item_);
  create_directories_or_fail(dir);
  std::map<std::string, std::string> data;
  for (const auto& [k, v] : plan.spec.data) data[k] = v;
  if (data.count("dir"))
    fail("items.{}: a length item generates {}'s task at other lengths; that sweep reads a dataset that "
         "exists (data.dir {}), which has no task to generate", item_.name, item_.from, data["dir"]);
  std::vector<const SweepRun*> runs;
  if (part_.all_runs)
    for (const auto& run : plan.runs) runs.push_back(&run);
  for (size_t i = 0; i < part_.runs.size(); ++i)
    runs.push_back(ctx_.pick_run(from, part_.runs[i], fmt::format("items.{}.runs[{}]", item_.name, i)));
  // A results.csv like a sweep's (so `rmt table` / `rmt plot` read it): one row per run and
  // evaluation length; `segments` is the number of segments evaluated at the trained length.
  std::string csv = "model.kind,segments,model.num_mem_tokens,model.mem_len,train.seed,segment_length,"
                    "eval_length,trained_segments,acc_teacher_forced,acc_free_running,non_finite_samples,"
                    "samples,eval_seconds,status\n";
  const fs::path work = fs::path(ctx_.options.runs_dir) / item_.name;
  // The datasets (one per length), then the evaluations still to do, -j at a time, in order.
  std::vector<fs::path> data_dirs;  // generated once, and only when some run is there to evaluate
  if (std::any_of(runs.begin(), runs.end(), [&](const SweepRun* r) { return run_state(*r) == RunState::done; }))
    for (int L : part_.lengths) data_dirs.push_back(length_dataset(work / "data", data, L));
  std::vector<LengthEvalJob> jobs;
  for (const SweepRun* run : runs) {
    if (run_state(*run) != RunState::done) continue;
    for (size_t l = 0; l < part_.lengths.size(); ++l)
      jobs.push_back({run, part_.lengths[l], data_dirs[l],
                      work / "evals" / fmt::format("{}_{}.json", run->run_id, part_.lengths[l])});
  }
  const std::vector<LengthEval> evals = evaluate_lengths(jobs, ctx_.options.jobs);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const Config& c = jobs[j].run->config;
    const LengthEval& e = evals[j];
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{:.1f},done\n", c.model.kind, e.segments,
                       c.model.num_mem_tokens, c.model.mem_len, c.train.seed, e.segment_length, jobs[j].length,
                       c.segments, e.acc_teacher_forced, e.acc_free_running, e.non_finite_samples, e.samples,
                       e.seconds);
  }
  write_file_atomic(dir / "results.csv", csv);
}

void LengthHandler::summarise() {
  const fs::path dir = ctx_.out_dir(item_);
  if (!primary_there(dir / "results.csv")) return;
  const CsvTable table = parse_csv(read_file(dir / "results.csv"), (dir / "results.csv").string());
  if (!this_config(dir / "results.csv", other_config(table))) return;
  bool free_running_differs = false;  // a one-token answer decodes as it is teacher-forced
  double eval_seconds = 0;
  const int c_tf = table.column("acc_teacher_forced"), c_fr = table.column("acc_free_running"),
            c_seconds = table.column("eval_seconds");
  // The evaluations with samples whose outputs were not finite (scored as wrong answers), each
  // "kind seed S at N segments (K of M samples)"; results.csv of older rmt has no such column.
  std::vector<std::string> non_finite;
  const int c_non_finite = table.column("non_finite_samples"), c_samples = table.column("samples"),
            c_kind = table.column("model.kind"), c_seed = table.column("train.seed"),
            c_segments = table.column("segments");
  for (const auto& row : table.rows) {
    if (c_tf >= 0 && c_fr >= 0 && !row[size_t(c_fr)].empty())
      free_running_differs |= std::stod(row[size_t(c_fr)]) != std::stod(row[size_t(c_tf)]);
    if (c_seconds >= 0) eval_seconds += std::stod(row[size_t(c_seconds)]);
    if (c_non_finite >= 0 && std::stoll(row[size_t(c_non_finite)]) > 0)
      non_finite.push_back(fmt::format("{} seed {} at {} segments ({} of {} samples)", row[size_t(c_kind)],
                                       row[size_t(c_seed)], row[size_t(c_segments)], row[size_t(c_non_finite)],
                                       row[size_t(c_samples)]));
  }
  std::string md;
  std::vector<ClaimResult> checks;
  for (const std::string metric : {"acc_teacher_forced", "acc_free_running"}) {
    if (metric == "acc_free_running" && !free_running_differs) continue;
    Pivot pivot = pivot_results(table, metric, {}, (dir / "results.csv").string());
    if (pivot.rows.empty()) continue;
    md += format_pivot(pivot, "md") + "\n";
    if (metric == std::string("acc_teacher_forced")) {
      const fs::path png = dir / (item_.name + ".png");
      draw_plot(gnuplot_script(pivot, png.string(), item_.title, kReportFigure), png.string());
      md += fmt::format("![{}]({}/{})\n\n", item_.name, item_.name, png.filename().string());
      for (const Claim& claim : part_.claims) checks.push_back(check_claim(claim, pivot, ctx_.manifest.tolerance));
    }
  }
  if (!non_finite.empty())
    md += fmt::format("Samples whose outputs were not finite numbers, scored as wrong answers (in the accuracies "
                      "above): {}.\n\n", fmt::join(non_finite, ", "));
  if (!table.rows.empty())
    md += fmt::format("Evaluation: {} test splits (one thread each), {} in all.\n\n", table.rows.size(),
                      seconds_text(eval_seconds));
  if (!checks.empty()) md += claims_markdown(claim_lines(part_.claims), checks, item_.beyond_the_paper) + "\n";
  write_file_atomic(dir / "table.md", md);
  found_results(checks);
}

std::string LengthHandler::other_config(const CsvTable& table) const {
  // The runs it evaluates, by what a row says of its run (kind, trained segments, seed).
  const ReproItem& from = *ctx_.manifest.find(item_.from);
  const SweepPlan& plan = ctx_.plan_of(from);
  std::map<std::string, std::string> run_ids;
  auto key = [](const std::string& kind, const std::string& segments, const std::string& seed) {
    return fmt::format("{} at {} segments, seed {}", kind, segments, seed);
  };
  auto add = [&](const SweepRun& run) {
    run_ids[key(run.config.model.kind, std::to_string(run.config.segments), std::to_string(run.config.train.seed))] =
        run.run_id;
  };
  if (part_.all_runs)
    for (const auto& run : plan.runs) add(run);
  for (size_t i = 0; i < part_.runs.size(); ++i)
    add(*ctx_.pick_run(from, part_.runs[i], fmt::format("items.{}.runs[{}]", item_.name, i)));
  // Its rows carry no run ids: the runs they evaluated are the ones the sweep item's results held
  // (written before this item summarises), which are its config's or not reported.
  const fs::path from_csv = ctx_.out_dir(from) / "results.csv";
  std::set<std::string> from_ids;
  if (fs::exists(from_csv)) {
    const CsvTable runs = parse_csv(read_file(from_csv), from_csv.string());
    const int c_id = runs.column("run_id"), c_status = runs.column("status");
    for (const auto& row : runs.rows)
      if (c_id >= 0 && c_status >= 0 && row[size_t(c_status)] == "done") from_ids.insert(row[size_t(c_id)]);
  }
  const int c_kind = table.column("model.kind"), c_trained = table.column("trained_segments"),
            c_seed = table.column("train.seed"), c_length = table.column("eval_length");
  if (c_kind < 0 || c_trained < 0 || c_seed < 0 || c_length < 0)
    return "no model.kind, trained_segments, train.seed or eval_length column";
  for (const auto& row : table.rows) {
    const std::string run = key(row[size_t(c_kind)], row[size_t(c_trained)], row[size_t(c_seed)]);
    const auto id = run_ids.find(run);
    if (id == run_ids.end()) return fmt::format("{} is not a run the item evaluates", run);
    const std::string& length = row[size_t(c_length)];
    if (std::none_of(part_.lengths.begin(), part_.lengths.end(), [&](int L) { return std::to_string(L) == length; }))
      return fmt::format("length {} is not one of the item's lengths", length);
    if (!from_ids.count(id->second))
      return fmt::format("{} is not a finished run of {}'s results, {}", run, item_.from, from_csv.string());
  }
  return "";
}

}  // namespace

std::unique_ptr<ItemHandler> make_length_handler(const ReproItem& item, ReproContext& context) {
  return std::make_unique<LengthHandler>(item, context);
}

}  // namespace rmt
