#include "lib/run/run_data.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/files/io.h"
#include "lib/run/config.h"
#include "lib/run/run_directory.h"
#include "tasks/family.h"
#include "tasks/dataset.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// results.json's dataset_fingerprint; "" when the file or the key is absent.
std::string fingerprint_in_results(const fs::path& path) {
  if (!fs::is_regular_file(path)) return "";
  json results;
  try {
    results = json::parse(read_file(path));
  } catch (const json::exception& e) {
    fail("{}: not valid JSON ({}); cannot read the dataset fingerprint the run recorded",
         path.string(), e.what());
  }
  const auto it = results.find("dataset_fingerprint");
  if (it == results.end()) return "";
  if (!it->is_string())
    fail("{}: \"dataset_fingerprint\" is {}, expected a string", path.string(), with_article(it->type_name()));
  return it->get<std::string>();
}

// The "dataset_fingerprint" of a safetensors file's __metadata__, read from its header only
// (the state's tensors, Adam's moments among them, can be large).
std::string fingerprint_in_state(const fs::path& path) {
  if (!fs::is_regular_file(path)) return "";
  std::ifstream in(path, std::ios::binary);
  unsigned char size_bytes[8];
  if (!in.read(reinterpret_cast<char*>(size_bytes), 8)) fail("{}: shorter than a safetensors header", path.string());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | size_bytes[i];
  const auto file_size = fs::file_size(path);
  if (n > file_size - 8 || n > (uint64_t(1) << 27))
    fail("{}: safetensors header of {} bytes does not fit the file", path.string(), n);
  std::string header(size_t(n), '\0');
  if (!in.read(header.data(), std::streamsize(n))) fail("{}: cannot read its header", path.string());
  try {
    const json h = json::parse(header);
    const auto meta = h.find("__metadata__");
    if (meta == h.end() || !meta->is_object()) return "";
    const auto fp = meta->find("dataset_fingerprint");
    return fp != meta->end() && fp->is_string() ? fp->get<std::string>() : "";
  } catch (const json::exception& e) {
    fail("{}: its header is not valid JSON ({})", path.string(), e.what());
  }
}

}  // namespace

std::string recorded_dataset_fingerprint(const std::string& run_dir) {
  const fs::path dir(run_dir);
  const std::string from_results = fingerprint_in_results(dir / "results.json");
  return from_results.empty() ? fingerprint_in_state(dir / "state.safetensors") : from_results;
}

void check_run_dataset_unchanged(const std::string& run_dir, bool allow_changed) {
  const fs::path config_path = fs::path(run_dir) / "config.yaml";
  if (!fs::is_regular_file(config_path)) return;
  const std::string data_dir = load_config(config_path.string()).data;
  if (data_dir.empty() || !fs::is_directory(data_dir)) return;
  const std::string recorded = recorded_dataset_fingerprint(run_dir);
  if (recorded.empty()) {
    fmt::print(stderr, "note: run {} records no dataset fingerprint (an older rmt, or no checkpoint "
               "yet); dataset {} is not checked against the one it was trained on\n", run_dir, data_dir);
    return;
  }
  const std::string now = dataset_fingerprint(data_dir);
  if (now == recorded) return;
  if (allow_changed) {
    fmt::print(stderr, "warning: dataset {} changed since run {} was trained (fingerprint now {}, "
               "recorded {}); evaluating anyway as --allow-changed-data asks\n", data_dir, run_dir, now, recorded);
    return;
  }
  fail("dataset {} changed since run {} was trained: its fingerprint is now {}, the run recorded "
       "{}; regenerate it with the run's options, evaluate on other data with --data, or pass "
       "--allow-changed-data", data_dir, run_dir, now, recorded);
}

std::vector<NamedPath> trained_run_inputs(const std::string& run_dir, const std::string& checkpoint,
                                          const std::string& data_dir) {
  const fs::path run(run_dir);
  const bool named = checkpoint == "best" || checkpoint == "last";
  // The checkpoint first: an output that is it is named as the checkpoint, not as a run file.
  std::vector<NamedPath> inputs{{"--checkpoint", named ? (run / (checkpoint + ".safetensors")).string() : checkpoint}};
  for (const std::string& f : kRunFiles) inputs.push_back({"--run", (run / f).string()});
  std::error_code ec;
  const fs::path config = run / "config.yaml";
  std::string run_data;
  if (fs::is_regular_file(config, ec)) {
    try {
      run_data = load_config(config.string()).data;
    } catch (const Error&) {  // named where the run is loaded
    }
  }
  // --data first: where it is the run's own dataset, the option the user gave names it.
  for (NamedPath& f : files_in_dir("--data", data_dir)) inputs.push_back(std::move(f));
  for (NamedPath& f : files_in_dir("(the run's dataset)", run_data)) inputs.push_back(std::move(f));
  return inputs;
}

}  // namespace rmt
