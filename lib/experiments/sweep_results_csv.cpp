// A sweep's results.csv (sweep.h), rebuilt from its run directories.
#include "lib/experiments/sweep.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/experiments/results_table.h"
#include "lib/experiments/sweep_internal.h"
#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/files/io.h"
#include "lib/run/config_family.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace sweep_internal;

namespace {

std::string json_number(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "";
  if (j[key].is_number_float()) return fmt::format("{:.6g}", j[key].get<double>());
  return j[key].dump();
}

// A finished run's results.json, read strictly: a truncated file is no run that went to its
// max_steps, and a value of the wrong type is named (file and key) rather than an internal error.
// Where a finished run's numbers came from (results.json): the device, the CPU, its vector
// extensions and the build ("g++ 12.2.0 -O3 ... -march=native; oneDNN 2.6.3"); "unknown" for a
// run recorded before results.json named them, empty for a failed run.
std::vector<std::string> provenance_columns(const json& r, bool done) {
  if (!done) return {"", "", "", ""};
  auto text = [&](const char* key) { return r.contains(key) ? r[key].get<std::string>() : std::string("unknown"); };
  std::string build = "unknown";
  if (r.contains("compiler") && r.contains("build_flags") && r.contains("gemm"))
    build = fmt::format("{} {}; {}", text("compiler"), text("build_flags"), text("gemm"));
  return {text("device"), text("cpu_model"), text("vector_extensions"), build};
}

json read_run_results(const fs::path& file) {
  const json r = json::parse(read_file(file), nullptr, false);
  if (r.is_discarded() || !r.is_object())
    fail("{}: not a complete JSON object (truncated or damaged); remove it to train the run again", file.string());
  for (const char* key : {"acc_teacher_forced", "acc_free_running", "exact_match", "exact_match_teacher_forced",
                          "solve_rate", "solve_rate_teacher_forced", "loss", "bpc", "steps", "solved_step", "wall_time_s", "threads"})
    if (r.contains(key) && !r[key].is_null() && !r[key].is_number())
      fail("{}: \"{}\" is {}, expected a number", file.string(), key, with_article(r[key].type_name()));
  for (const char* key : {"end_reason", "git_commit", "device", "cpu_model", "vector_extensions", "compiler",
                          "build_flags", "gemm"})
    if (r.contains(key) && !r[key].is_string())
      fail("{}: \"{}\" is {}, expected a string", file.string(), key, with_article(r[key].type_name()));
  return r;
}

}  // namespace

std::string results_csv_text(const SweepPlan& plan) {
  // Columns: the grid and derived keys, the keys every table needs, then the metrics.
  std::vector<std::string> config_cols = plan.columns;
  for (const char* k : {"model.kind", "segments", "model.num_mem_tokens", "model.mem_len", "bptt", "train.seed"})
    if (std::find(config_cols.begin(), config_cols.end(), k) == config_cols.end()) config_cols.push_back(k);
  // Sweeps whose runs stop when solved: the target, for the tables' solve counts (other sweeps'
  // files stay as they were).
  bool any_target = false;
  for (const auto& run : plan.runs) any_target = any_target || run.config.train.target > 0;
  if (any_target && std::find(config_cols.begin(), config_cols.end(), "train.target") == config_cols.end())
    config_cols.push_back("train.target");
  // Language models (a sweep over text) add bpc after loss; other sweeps' files stay as they were.
  bool any_bpc = false;
  for (const auto& run : plan.runs) any_bpc = any_bpc || config_family(run.config).validates_bpc();
  std::vector<std::string> metrics = {"acc_teacher_forced", "acc_free_running", "exact_match", "solve_rate",
                                      "solve_rate_teacher_forced", "loss"};
  if (any_bpc) metrics.push_back("bpc");
  std::vector<std::string> tail = {"segment_length"};
  tail.insert(tail.end(), metrics.begin(), metrics.end());
  for (const char* k : {"run_id", "status", "steps", "end_reason", "solved_step", "wall_time_s", "git_commit", "threads",
                        "device", "cpu_model", "vector_extensions", "build", "error"})
    tail.push_back(k);
  std::vector<std::string> header = config_cols;
  header.insert(header.end(), tail.begin(), tail.end());
  std::string out;
  for (size_t i = 0; i < header.size(); ++i) out += (i ? "," : "") + csv_field(header[i]);
  out += "\n";
  for (const auto& run : plan.runs) {
    RunState state = run_state(run);
    if (state != RunState::done && state != RunState::failed) continue;
    std::vector<std::string> row;
    for (const auto& key : config_cols)
      if (key == "segments") row.push_back(std::to_string(config_family(run.config).step_segments(run.config)));
      else if (!is_data_key(key)) row.push_back(config_value(run.config, key));
      else if (auto it = run.data_options.find(key.substr(5)); it != run.data_options.end()) row.push_back(it->second);
      else row.push_back("");
    json r;
    std::string error;
    if (state == RunState::done) {
      r = read_run_results(run.dir / "results.json");
    } else {
      error = read_file(run.dir / "sweep_error.txt");
      while (!error.empty() && (error.back() == '\n' || error.back() == '\r')) error.pop_back();
    }
    row.push_back(std::to_string(run.segment_length));
    for (const std::string& k : metrics) row.push_back(json_number(r, k.c_str()));
    row.push_back(run.run_id);
    row.push_back(state == RunState::done ? "done" : "failed");
    row.push_back(json_number(r, "steps"));
    // results.json written before the stopping rule: a done run went to its max_steps
    row.push_back(state != RunState::done ? ""
                  : r.contains("end_reason") ? r["end_reason"].get<std::string>() : "max_steps");
    row.push_back(json_number(r, "solved_step"));
    row.push_back(r.contains("wall_time_s") && !r["wall_time_s"].is_null() ? fmt::format("{:.1f}", r["wall_time_s"].get<double>()) : "");
    row.push_back(r.contains("git_commit") ? r["git_commit"].get<std::string>() : "");
    row.push_back(json_number(r, "threads"));
    for (const std::string& value : provenance_columns(r, state == RunState::done)) row.push_back(value);
    row.push_back(error);
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + csv_field(row[i]);
    out += "\n";
  }
  return out;
}

void write_results_csv(const SweepPlan& plan) {
  fs::create_directories(plan.sweep_dir);
  write_file_atomic(plan.sweep_dir / "results.csv", results_csv_text(plan));
}

}  // namespace rmt
