// Writing a dataset directory: `rmt generate` of the algorithmic tasks (samples drawn, de-duplicated,
// split, written atomically, meta.yaml last).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <cmath>
#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "build_info.h"
#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/core/system.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset_check.h"
#include "tasks/tasks.h"

namespace rmt {

namespace fs = std::filesystem;

void prepare_out_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) fail("output path {} exists and is not a directory", dir);
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create output directory {}: {}", dir, ec.message());
  if (::access(dir.c_str(), W_OK) != 0) fail("output directory {} is not writable", dir);
}

static std::string meta_yaml_text(const GenerateRequest& r, const std::vector<std::pair<std::string, std::string>>& hashes) {
  const TaskOptions& t = r.task;
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "rmt_version" << YAML::Value << RMT_VERSION;
  out << YAML::Key << "task" << YAML::Value << t.name;
  out << YAML::Key << "kind" << YAML::Value << t.kind;
  out << YAML::Key << "file_prefix" << YAML::Value << t.name;
  out << YAML::Key << "options" << YAML::Value << YAML::Flow << YAML::BeginMap;
  if (t.kind == "copy" || t.kind == "reverse")
    out << YAML::Key << "length" << YAML::Value << t.length << YAML::Key << "symbols" << YAML::Value << t.symbols;
  if (t.kind == "retrieval") out << YAML::Key << "pairs" << YAML::Value << t.pairs;
  if (t.kind == "sqeq")
    out << YAML::Key << "max_root" << YAML::Value << t.max_root << YAML::Key << "max_alpha" << YAML::Value
        << t.max_alpha;
  if (is_babilong_kind(t.kind)) {
    out << YAML::Key << "length" << YAML::Value << t.length << YAML::Key << "facts" << YAML::Value << t.facts
        << YAML::Key << "distractors" << YAML::Value << t.distractors << YAML::Key << "noise" << YAML::Value << t.noise
        << YAML::Key << "noise_words" << YAML::Value << t.noise_words;
    // What made the noise, so that a user can see it (the text is not needed to read the dataset).
    if (t.noise == "text")
      out << YAML::Key << "noise_text" << YAML::Value << t.noise_text << YAML::Key << "noise_text_sha256"
          << YAML::Value << t.noise_text_sha256;
  }
  out << YAML::EndMap;
  out << YAML::Key << "vocab" << YAML::Comment("id -> symbol") << YAML::Value << YAML::Flow << YAML::BeginMap;
  std::vector<std::string> vocab = task_vocab(t);
  for (size_t i = 0; i < vocab.size(); i++) out << YAML::Key << i << YAML::Value << vocab[i];
  out << YAML::EndMap;
  out << YAML::Key << "len_x" << YAML::Value << task_len_x(t);
  out << YAML::Key << "len_y" << YAML::Value << task_len_y(t);
  out << YAML::Key << "input_length" << YAML::Value
      << (task_stacked(t) ? task_len_x(t) + task_len_y(t) - 1 : task_len_x(t));
  out << YAML::Key << "answer_size" << YAML::Value << task_answer_size(t);
  out << YAML::Key << "stacked" << YAML::Value << task_stacked(t);
  out << YAML::Key << "seed" << YAML::Value << r.seed;
  out << YAML::Key << "prng" << YAML::Value << "std::mt19937_64, rejection-sampled bounded ints (tasks/rng.h)";
  out << YAML::Key << "counts" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "train"
      << YAML::Value << r.sizes.train << YAML::Key << "val" << YAML::Value << r.sizes.val << YAML::Key << "test"
      << YAML::Value << r.sizes.test << YAML::EndMap;
  out << YAML::Key << "sha256" << YAML::Value << YAML::BeginMap;
  for (auto& [name, hex] : hashes) out << YAML::Key << name << YAML::Value << hex;
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void refuse_existing_outputs(const std::vector<std::string>& targets, const std::string& out_dir, bool force) {
  if (force) return;
  std::error_code ec;
  for (const std::string& f : targets)
    if (fs::exists(fs::symlink_status(f, ec)))
      fail("{} already exists; pass --force to overwrite the dataset in {}", f, out_dir);
}

// Space left on the file system that will hold `dir` (its nearest existing ancestor).
std::optional<uint64_t> free_disk_bytes(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  const fs::space_info s = fs::space(p, ec);
  if (ec) return std::nullopt;
  return uint64_t(s.available);
}

// Sizes that cannot be generated fail here, before anything is written.
static void check_generate_sizes(const GenerateRequest& r) {
  const TaskOptions& t = r.task;
  const SplitSizes& s = r.sizes;
  // Every split is needed: train trains on train, picks the best checkpoint on val, reports test.
  for (auto [flag, n] : {std::pair{"--train", s.train}, std::pair{"--val", s.val}, std::pair{"--test", s.test}})
    if (n < 1) fail("{} must be at least 1 (got {}): training needs all three splits", flag, n);
  // Memory while generating: all X rows, the duplicate set (about 48 bytes a row), and the
  // largest split's y plus the bytes of its two files. In double: the sizes may be absurd.
  const double total = double(s.train) + double(s.val) + double(s.test), largest = double(std::max({s.train, s.val, s.test}));
  const double len_x = task_len_x(t), len_y = task_len_y(t);
  const double memory = total * len_x * 8 + total * 48 + largest * (len_y * 8 + (len_x + len_y) * 8);
  const uint64_t ram = sys::physical_memory_bytes();
  if (ram > 0 && memory > double(ram))
    fail("train {} + val {} + test {} samples of {} (X {} ids, y {} ids each) need about {} of memory to "
         "generate; this machine has {}", s.train, s.val, s.test, t.name, int(len_x), int(len_y), format_bytes(memory), format_bytes(double(ram)));
  const int64_t possible = max_unique_samples(t);  // <= 2^62: the sums below cannot overflow
  // A sqeq range is part of what limits the count: name it.
  const std::string what = t.kind == "sqeq" && (t.max_root != kSqeqDefaultMaxRoot || t.max_alpha != kSqeqDefaultMaxAlpha)
                               ? fmt::format("{} --max-root {} --max-alpha {}", t.name, t.max_root, t.max_alpha)
                               : t.name;
  for (auto [flag, n] : {std::pair{"--train", s.train}, std::pair{"--val", s.val}, std::pair{"--test", s.test}})
    if (n > possible)
      fail("{} {} is more than {} has: only {} distinct samples", flag, n, what, possible);
  if (s.train > possible - s.val || s.train + s.val > possible - s.test)
    fail("{} samples requested (train {} + val {} + test {}) but {} has only {} distinct samples",
         uint64_t(s.train) + uint64_t(s.val) + uint64_t(s.test), s.train, s.val, s.test, what, possible);
  const double disk = total * (len_x + len_y) * 8 + 6 * 256.0;
  const std::optional<uint64_t> free_bytes = free_disk_bytes(r.out_dir);
  if (free_bytes && disk > double(*free_bytes))
    fail("the dataset needs about {} of disk, but {} has {} free", format_bytes(disk), r.out_dir,
         format_bytes(double(*free_bytes)));
}

GenerateResult generate_dataset(const GenerateRequest& r) {
  const auto start = std::chrono::steady_clock::now();
  const TaskOptions& t = r.task;
  const SplitSizes& s = r.sizes;
  check_generate_sizes(r);
  const std::string meta_path = (fs::path(r.out_dir) / "meta.yaml").string();
  std::vector<std::string> targets = {meta_path};
  for (const char* split : kSplits)
    for (const char* which : {"X", "y"}) targets.push_back(dataset_file(r.out_dir, t.name, split, which));
  refuse_existing_outputs(targets, r.out_dir, r.force);
  // A BABILong-style task's count of distinct samples is an estimate (text noise repeats its
  // words): only the draw shows that there are enough, so --check draws them too.
  std::vector<int64_t> X;
  if (!r.check_only || is_babilong_kind(t.kind)) X = generate_unique_x(t, s.total(), r.seed);
  if (r.check_only) return GenerateResult();
  prepare_out_dir(r.out_dir);
  // Remove the old meta first: until the new one is written last, the directory is visibly incomplete.
  std::error_code ec;
  fs::remove(meta_path, ec);

  const int len_x = task_len_x(t), len_y = task_len_y(t);
  GenerateResult result;
  if (t.kind == "sqeq") {
    // De-duplication keeps the paper's 20% of samples without real roots only while the rooted
    // equations are plentiful; a small range runs out of them first. Say so.
    int64_t none = 0;
    for (int64_t i = 0; i < s.total(); i++) none += X[size_t(i * len_x + (kSqeqBlocks - 1) * kSqeqBlock)] == 0;
    const double share = double(none) / double(s.total());
    const int64_t values = 2 * int64_t(t.max_root) - 1;
    if (std::abs(share - 0.2) > std::max(0.05, 4 * std::sqrt(0.16 / double(s.total()))))
      result.notes.push_back(fmt::format(
          "{:.1f}% of the {} samples have no real roots (the paper's mix: 20%): --max-root {} --max-alpha {} has "
          "only {} distinct equations with real roots", 100 * share, s.total(), t.max_root, t.max_alpha,
          values * (values + 1) / 2 * 2 * t.max_alpha));
  }

  std::vector<std::pair<std::string, std::string>> hashes;
  const int64_t counts[3] = {s.train, s.val, s.test};
  int64_t row0 = 0;
  for (int k = 0; k < 3; k++) {
    const int64_t n = counts[k];
    std::vector<int64_t> y(size_t(n) * len_y);
    const int64_t* x = X.data() + row0 * len_x;
    for (int64_t i = 0; i < n; i++) target_from_x(t, x + i * len_x, y.data() + i * len_y);
    const std::string x_bytes = npy_bytes_int64({n, len_x}, x);
    const std::string y_bytes = npy_bytes_int64({n, len_y}, y.data());
    for (auto [which, bytes] : {std::pair{"X", &x_bytes}, std::pair{"y", &y_bytes}}) {
      const std::string path = dataset_file(r.out_dir, t.name, kSplits[k], which);
      write_file_atomic(path, *bytes);
      hashes.push_back({fs::path(path).filename().string(), sha256_hex(*bytes)});
      result.files.push_back(path);
    }
    row0 += n;
  }
  write_file_atomic(meta_path, meta_yaml_text(r, hashes));
  result.files.push_back(meta_path);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace rmt
