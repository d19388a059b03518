#include "lib/run/run_directory.h"

#include <algorithm>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/run/config.h"

namespace rmt {

namespace fs = std::filesystem;

const std::vector<std::string> kRunFiles = {"config.yaml", "metrics.jsonl", "last.safetensors",
                                            "best.safetensors", "state.safetensors", "results.json"};

void check_run_dir_outside_data(const fs::path& dir, const std::string& data) {
  std::error_code ec;
  const fs::path run = fs::weakly_canonical(fs::absolute(dir, ec), ec), dataset = fs::weakly_canonical(fs::absolute(data, ec), ec);
  if (ec) return;  // an unreadable path is refused where it is opened
  const auto [d, r] = std::mismatch(dataset.begin(), dataset.end(), run.begin(), run.end());
  if (d == dataset.end())
    fail("--out {}: is {}the dataset directory {}; a run's files would mix with the dataset's: give "
         "the run its own directory", dir.string(), r == run.end() ? "" : "inside ", data);
}

bool open_run_directory(const fs::path& dir, const std::string& config_text, bool resume, DirectoryLock& lock) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    fail("--out {} exists and is not a directory", dir.string());
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create run directory {}: {}", dir.string(), ec.message());
  // One process at a time per run directory: the lock makes the temp-file cleanup below safe
  // (no other train can be writing here) and stops two trainings from interleaving checkpoints.
  if (!lock.try_lock(dir))
    fail("{} is in use by another rmt train (it holds the run directory's lock); wait for it "
         "to end, or choose another --out", dir.string());
  for (const fs::path& p : remove_stale_temp_files(dir, kRunFiles))
    fmt::print(stderr, "removed {}, left by a write that was killed mid-way\n", p.string());

  const fs::path config_path = dir / "config.yaml", state_path = dir / "state.safetensors";
  bool holds_run = false;
  for (const std::string& f : kRunFiles) holds_run = holds_run || fs::exists(dir / f);
  const bool has_checkpoint = fs::exists(state_path);
  // Resuming a run that has a checkpoint continues from it; resuming one that stopped before
  // its first checkpoint restarts it from step 0 (the same run, bit for bit).
  const bool resuming = resume && has_checkpoint;
  if (resume && holds_run) {
    if (!fs::exists(config_path)) {
      if (has_checkpoint)
        fail("{}: missing; cannot check that --resume uses the run's config", config_path.string());
    } else if (const std::string saved = read_file(config_path); !same_config_text(saved, config_text)) {
      // Named by the first key that differs.
      const std::string where = first_config_difference(saved, config_text);
      fail("{}: the saved config differs from this one{}; resume with the same config and --set "
           "options, or train into a new directory", config_path.string(), where.empty() ? "" : ": " + where);
    }
    if (!has_checkpoint) {
      // Whatever a run without a checkpoint left is redone from scratch.
      for (const char* f : {"metrics.jsonl", "last.safetensors", "best.safetensors", "results.json"})
        fs::remove(dir / f, ec);
      write_file_atomic(config_path, config_text);
      fmt::print(stderr, "{} stopped before its first checkpoint: restarting it from step 0\n",
                 dir.string());
    }
  } else if (holds_run) {
    if (has_checkpoint)
      fail("{} already holds a run; add --resume to continue it from its last checkpoint, or "
           "choose another --out", dir.string());
    fail("{} holds a run that stopped before its first checkpoint; add --resume to restart it "
         "from step 0 with the same config, or choose another --out", dir.string());
  } else {
    write_file_atomic(config_path, config_text);
  }
  return resuming;
}

Config load_run_config(const std::string& run_dir) {
  const std::string path = run_dir + "/config.yaml";
  if (!fs::exists(path)) fail("{}: no config.yaml (is this an rmt run directory?)", run_dir);
  const std::string text = read_file(path);
  bool no_keys = false;
  try {
    const YAML::Node root = YAML::Load(text);
    no_keys = root.IsNull() || (root.IsMap() && root.size() == 0);
  } catch (const YAML::Exception&) {  // parse_config names the line
  }
  if (no_keys)
    fail("{}: holds no config keys; rmt train writes every key of the run there, and without them "
         "what the run was trained with is unknown (the defaults are not it)", path);
  return parse_config(text, path);
}

}  // namespace rmt
