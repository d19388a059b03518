#include "lib/experiments/repro_length.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/experiments/generated_data.h"
#include "lib/experiments/process.h"
#include "lib/files/io.h"
#include "lib/run/eval_run.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path length_dataset(const std::string& rmt_binary, const fs::path& data_root,
                        const std::map<std::string, std::string>& data, int length) {
  const auto task = data.find("task");
  const fs::path dir = data_root / fmt::format("{}{}", task == data.end() ? "" : task->second, length);
  std::vector<std::string> args = {"generate", task == data.end() ? "" : task->second, "--out",
                                   dir.string(), "--force", "--length", std::to_string(length), "--train", "1",
                                   "--val", "1"};
  for (const auto& [k, v] : data)
    if (k != "task" && k != "length" && k != "train" && k != "val") args.insert(args.end(), {generate_flag(k), v});
  if (fs::exists(dir / "meta.yaml")) {  // generated before: the same options (a changed sweep file)?
    check_generated_dataset(dir, args);
    return dir;
  }
  create_directories_or_fail(dir);
  const fs::path log_file = dir / "generate.log";
  fs::remove(log_file);
  if (run_logged(rmt_binary, args, log_file) != 0) fail("generating {} failed: {}", dir.string(), read_file(log_file));
  return dir;
}

namespace {

void write_kept(const fs::path& kept, const std::string& run_id, const fs::path& data_dir, const LengthEval& e) {
  const json j = {{"run_id", run_id}, {"data", data_dir.string()}, {"segments", e.segments},
                  {"segment_length", e.segment_length}, {"acc_teacher_forced", e.acc_teacher_forced},
                  {"acc_free_running", e.acc_free_running}, {"seconds", e.seconds}};
  create_directories_or_fail(kept.parent_path());
  write_file_atomic(kept, j.dump(2) + "\n");
}

// `rmt eval` of one job in a process of its own; "" on success, else why it failed.
std::string evaluate_in_subprocess(const std::string& rmt_binary, const LengthEvalJob& job) {
  const fs::path out = job.kept.string() + ".eval.out";
  const auto t0 = std::chrono::steady_clock::now();
  fs::remove(out);
  const int status = run_logged(rmt_binary, {"eval", "--run", job.run->dir.string(), "--data", job.data_dir.string(),
                                             "--split", "test", "--threads", "1"}, out);
  LengthEval e;
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string text = fs::exists(out) ? read_file(out) : "";
  fs::remove(out);
  if (status != 0) return fmt::format("rmt eval of {} on {}: {}", job.run->run_id, job.data_dir.string(), text);
  try {
    const json j = json::parse(text.substr(text.find('{')));  // the one JSON object it prints
    const std::vector<int> seg_len = j.at("segment_lengths").get<std::vector<int>>();
    e.segments = int(seg_len.size());
    e.segment_length = *std::max_element(seg_len.begin(), seg_len.end());
    e.acc_teacher_forced = j.at("acc_teacher_forced").get<double>();
    if (!j.at("acc_free_running").is_null()) e.acc_free_running = fmt::format("{}", j["acc_free_running"].get<double>());
  } catch (const std::exception& ex) {
    return fmt::format("rmt eval of {} on {} printed no result ({}): {}", job.run->run_id,
                       job.data_dir.string(), ex.what(), text);
  }
  write_kept(job.kept, job.run->run_id, job.data_dir, e);
  return "";
}

}  // namespace

void evaluate_lengths(const std::string& rmt_binary, const std::vector<LengthEvalJob>& jobs, int parallel) {
  std::vector<const LengthEvalJob*> pending;
  for (const LengthEvalJob& job : jobs)
    if (!fs::exists(job.kept)) {
      pending.push_back(&job);
      create_directories_or_fail(job.kept.parent_path());
    }
  std::atomic<size_t> next{0};
  std::vector<std::string> errors(pending.size());
  std::vector<std::thread> workers;
  for (int w = 0; w < std::min<int>(parallel, int(pending.size())); ++w)
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < pending.size();) errors[i] = evaluate_in_subprocess(rmt_binary, *pending[i]);
    });
  for (std::thread& t : workers) t.join();
  for (const std::string& error : errors)
    if (!error.empty()) fail("{}", error);
}

LengthEval evaluate_length(const SweepRun& run, const fs::path& data_dir, const fs::path& kept) {
  LengthEval e;
  if (fs::exists(kept)) {
    try {
      const json j = json::parse(read_file(kept));
      e.segments = j.at("segments").get<int>();
      e.segment_length = j.at("segment_length").get<int>();
      e.acc_teacher_forced = j.at("acc_teacher_forced").get<double>();
      e.acc_free_running = j.at("acc_free_running").get<std::string>();
      e.seconds = j.at("seconds").get<double>();
      return e;
    } catch (const std::exception& ex) {
      fail("{}: not an evaluation this reproduction wrote ({}); delete it to evaluate again", kept.string(),
           ex.what());
    }
  }
  EvalRunRequest req;
  req.run_dir = run.dir.string();
  req.data_dir = data_dir.string();
  req.split = "test";
  req.threads = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const EvalRunResult r = evaluate_run(req);
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  e.segments = int(r.seg_len.size());
  e.segment_length = *std::max_element(r.seg_len.begin(), r.seg_len.end());
  e.acc_teacher_forced = r.result.acc_teacher_forced;
  if (r.result.acc_free_running) e.acc_free_running = fmt::format("{}", *r.result.acc_free_running);
  write_kept(kept, run.run_id, data_dir, e);
  return e;
}

}  // namespace rmt
