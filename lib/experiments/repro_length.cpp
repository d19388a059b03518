#include "lib/experiments/repro_length.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/run/eval_run.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path length_dataset(const std::string& rmt_binary, const fs::path& data_root,
                        const std::map<std::string, std::string>& data, int length) {
  const auto task = data.find("task");
  const fs::path dir = data_root / fmt::format("{}{}", task == data.end() ? "" : task->second, length);
  if (fs::exists(dir / "meta.yaml")) return dir;
  std::vector<std::string> args = {rmt_binary, "generate", task == data.end() ? "" : task->second, "--out",
                                   dir.string(), "--force", "--length", std::to_string(length), "--train", "1",
                                   "--val", "1"};
  for (const auto& [k, v] : data)
    if (k != "task" && k != "length" && k != "train" && k != "val") args.insert(args.end(), {generate_flag(k), v});
  create_directories_or_fail(dir);
  std::string cmd;
  for (const auto& a : args) cmd += shell_quote(a) + " ";
  const fs::path log_file = dir / "generate.log";
  cmd += ">" + shell_quote(log_file.string()) + " 2>&1";
  if (std::system(cmd.c_str()) != 0) fail("generating {} failed: {}", dir.string(), read_file(log_file));
  return dir;
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
  const json j = {{"run_id", run.run_id}, {"data", data_dir.string()}, {"segments", e.segments},
                  {"segment_length", e.segment_length}, {"acc_teacher_forced", e.acc_teacher_forced},
                  {"acc_free_running", e.acc_free_running}, {"seconds", e.seconds}};
  create_directories_or_fail(kept.parent_path());
  write_file_atomic(kept, j.dump(2) + "\n");
  return e;
}

}  // namespace rmt
