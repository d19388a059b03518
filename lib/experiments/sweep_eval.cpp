// A sweep's eval: block (sweep_eval.h): the evaluations of its finished runs at other lengths.
#include "lib/experiments/sweep_eval.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/experiments/repro_length.h"
#include "lib/experiments/results_table.h"
#include "lib/experiments/sweep_internal.h"
#include "lib/files/io.h"
#include "lib/run/config_family.h"
#include "tasks/family.h"

namespace rmt {

namespace fs = std::filesystem;
using sweep_internal::config_value;
using sweep_internal::is_data_key;

namespace {

// One evaluation the block asks for: a finished run on one dataset.
struct EvalJob {
  const SweepRun* run;
  fs::path data_dir;        // generated (a multiple) or given
  std::string label;        // "x10", or the dataset's path as given
  int multiple = 0;         // the multiple asked for; 0 for a dataset given
  fs::path kept;            // RUNS/NAME/evals/RUN_ID/LABEL.json
};

// A task's length as its dataset says it: the task's length option, or its input positions for
// a task without one (an imported one).
int task_length(const fs::path& dir) {
  const DatasetMeta meta = dataset_family(dir.string()).samples_meta(dir.string());
  return meta.length > 0 ? meta.length : meta.input_length;
}

// The data options' length as an integer (sweep_spec.cpp checked the block needs one).
int data_length(const SweepRun& run) {
  const auto it = run.data_options.find("length");
  if (it == run.data_options.end()) fail("run {} has no data length to take multiples of", run.run_id);
  return std::stoi(it->second);
}

// The evaluations of the plan's finished runs, in run order then the block's order. With
// `generate`, the datasets of the multiples are generated where missing.
std::vector<EvalJob> eval_jobs(const SweepPlan& plan, bool generate) {
  std::vector<EvalJob> jobs;
  if (!plan.spec.eval) return jobs;
  const SweepEvalSpec& eval = *plan.spec.eval;
  for (const SweepRun& run : plan.runs) {
    if (run_state(run) != RunState::done) continue;
    const fs::path evals = plan.sweep_dir / "evals" / run.run_id;
    for (const int k : eval.multiples) {
      // The run's dataset regenerated at k x its length: one directory per trained dataset.
      const fs::path root = plan.sweep_dir / "eval_data" / fs::path(run.config.data).filename();
      std::map<std::string, std::string> options(run.data_options.begin(), run.data_options.end());
      const int length = k * data_length(run);
      const fs::path dir = generate ? length_dataset(root, options, length)
                                    : root / fmt::format("{}{}", options["task"], length);
      jobs.push_back({&run, dir, fmt::format("x{}", k), k, evals / fmt::format("x{}.json", k)});
    }
    for (const std::string& dir : eval.data) {
      if (generate && !fs::is_directory(dir))
        fail("{}: eval.data: {} does not exist (a dataset of the runs' task: rmt generate, rmt data import)",
             plan.spec.path, dir);
      // The kept file's name: the dataset's own name and a hash of its path and meta.yaml (which
      // holds its files' sha256), so a dataset changed at that path is evaluated again.
      const fs::path meta = fs::path(dir) / "meta.yaml";
      const std::string identity = dir + "\n" + (fs::exists(meta) ? read_file(meta) : std::string());
      const std::string name = fmt::format("{}-{}.json", fs::path(dir).lexically_normal().filename().string(),
                                           sha256_hex(identity).substr(0, 8));
      jobs.push_back({&run, dir, dir, 0, evals / name});
    }
  }
  return jobs;
}

std::string length_results_text(const SweepPlan& plan, const std::vector<EvalJob>& jobs,
                                 const std::vector<LengthEval>& evals, const std::vector<bool>& have) {
  // The run's grid and derived keys, the keys every table needs, then what was evaluated.
  std::vector<std::string> config_cols = plan.columns;
  for (const char* k : {"model.kind", "model.num_mem_tokens", "model.mem_len", "bptt", "train.seed"})
    if (std::find(config_cols.begin(), config_cols.end(), k) == config_cols.end()) config_cols.push_back(k);
  config_cols.erase(std::remove(config_cols.begin(), config_cols.end(), "segments"), config_cols.end());
  std::vector<std::string> header = {"trained_run"};
  header.insert(header.end(), config_cols.begin(), config_cols.end());
  for (const char* k : {"trained_segments", "trained_length", "eval_data", "eval_length", "length_multiple", "segments",
                        "segment_length", "acc_teacher_forced", "acc_free_running", "non_finite_samples", "samples",
                        "eval_seconds", "git_commit", "threads", "device", "cpu_model", "vector_extensions", "build",
                        "status"})
    header.push_back(k);
  std::string out;
  for (size_t i = 0; i < header.size(); ++i) out += (i ? "," : "") + csv_field(header[i]);
  out += "\n";
  std::map<std::string, int> trained_length;  // per dataset directory
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (!have[j]) continue;
    const SweepRun& run = *jobs[j].run;
    const LengthEval& e = evals[j];
    auto [it, fresh] = trained_length.emplace(run.config.data, 0);
    if (fresh) it->second = task_length(run.config.data);
    const int length = task_length(jobs[j].data_dir);
    std::vector<std::string> row = {run.run_id};
    for (const auto& key : config_cols)
      if (!is_data_key(key)) row.push_back(config_value(run.config, key));
      else if (auto d = run.data_options.find(key.substr(5)); d != run.data_options.end()) row.push_back(d->second);
      else row.push_back("");
    const std::string multiple = jobs[j].multiple > 0 ? std::to_string(jobs[j].multiple)
                                                      : fmt::format("{:.3g}", double(length) / it->second);
    for (const std::string& v :
         {std::to_string(config_family(run.config).step_segments(run.config)), std::to_string(it->second),
          jobs[j].label, std::to_string(length), multiple, std::to_string(e.segments), std::to_string(e.segment_length),
          fmt::format("{}", e.acc_teacher_forced), e.acc_free_running, std::to_string(e.non_finite_samples),
          std::to_string(e.samples), fmt::format("{:.1f}", e.seconds), e.git_commit, std::string("1"), e.device,
          e.cpu_model, e.vector_extensions, e.build, std::string("done")})
      row.push_back(v);
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + csv_field(row[i]);
    out += "\n";
  }
  return out;
}

// The jobs' kept evaluations (have[j]: kept), read back as evaluate_lengths reads them.
std::vector<LengthEval> kept_evaluations(const std::vector<EvalJob>& jobs, std::vector<bool>& have) {
  std::vector<LengthEvalJob> kept;
  std::vector<size_t> index;
  have.assign(jobs.size(), false);
  for (size_t j = 0; j < jobs.size(); ++j)
    if (fs::exists(jobs[j].kept)) kept.push_back({jobs[j].run, 0, jobs[j].data_dir, jobs[j].kept}), index.push_back(j);
  const std::vector<LengthEval> read = evaluate_lengths(kept, 1);  // all kept: reads, evaluates nothing
  std::vector<LengthEval> evals(jobs.size());
  for (size_t i = 0; i < index.size(); ++i) evals[index[i]] = read[i], have[index[i]] = true;
  return evals;
}

}  // namespace

size_t pending_evaluations(const SweepPlan& plan) {
  size_t pending = 0;
  for (const EvalJob& job : eval_jobs(plan, false)) pending += !fs::exists(job.kept);
  return pending;
}

void run_sweep_evaluations(const SweepPlan& plan, int jobs, bool quiet) {
  if (!plan.spec.eval) return;
  const std::vector<EvalJob> all = eval_jobs(plan, true);
  std::vector<LengthEvalJob> work;
  for (const EvalJob& job : all)
    work.push_back({job.run, 0, job.data_dir, job.kept, plan.spec.eval->segment_length});
  const size_t pending = size_t(std::count_if(all.begin(), all.end(), [](const EvalJob& j) { return !fs::exists(j.kept); }));
  if (!quiet && pending > 0)
    fmt::print(stderr, "sweep {}: {} evaluations at other lengths ({} kept), {} at a time, one thread each\n",
               plan.spec.name, pending, all.size() - pending, std::max(1, jobs));
  const std::vector<LengthEval> evals = evaluate_lengths(work, std::max(1, jobs));
  const fs::path csv = plan.sweep_dir / "length_results.csv";
  write_file_atomic(csv, length_results_text(plan, all, evals, std::vector<bool>(all.size(), true)));
  if (!quiet) fmt::print(stderr, "sweep {}: {} evaluations at other lengths in {}\n", plan.spec.name, all.size(),
                         csv.string());
}

size_t write_length_results(const SweepPlan& plan) {
  if (!plan.spec.eval) return 0;
  const std::vector<EvalJob> all = eval_jobs(plan, false);
  std::vector<bool> have;
  const std::vector<LengthEval> evals = kept_evaluations(all, have);
  write_file_atomic(plan.sweep_dir / "length_results.csv", length_results_text(plan, all, evals, have));
  return size_t(std::count(have.begin(), have.end(), false));
}

}  // namespace rmt
