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
#include <unordered_set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "build_info.h"
#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/core/system.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset_check.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {
// Hash set of row indices into a growing row-major matrix.
struct RowSet {
  const std::vector<int64_t>* rows;
  int len;
  size_t operator()(int64_t r) const {
    const int64_t* p = rows->data() + r * len;
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < len; i++) {
      h ^= uint64_t(p[i]) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    }
    return size_t(h);
  }
  bool operator()(int64_t a, int64_t b) const {
    return std::memcmp(rows->data() + a * len, rows->data() + b * len, size_t(len) * 8) == 0;
  }
};
}  // namespace

std::vector<int64_t> generate_unique_x(const TaskOptions& t, int64_t count, uint64_t seed) {
  const TaskKindTraits& kind = task_kind(t.kind);
  const int len_x = kind.len_x(t), len_y = kind.len_y(t);
  const int64_t possible = max_unique_samples(t);
  if (count > possible)
    fail("{} can produce only {} distinct samples, but {} were requested", t.name, possible, count);
  std::vector<int64_t> X(size_t(count + 1) * len_x);  // +1: scratch row for the next candidate
  std::vector<int64_t> y(len_y);
  RowSet rs{&X, len_x};
  std::unordered_set<int64_t, RowSet, RowSet> seen(size_t(count) * 2, rs, rs);
  TaskRng rng(seed);
  // Rejecting duplicates is the same as drawing i.i.d. and de-duplicating; near the limit it is a
  // coupon-collector loop, so bound the draws to fail instead of spinning.
  const int64_t max_draws = std::max<int64_t>(20'000'000, 50 * count);
  int64_t n = 0, draws = 0;
  while (n < count) {
    if (++draws > max_draws)
      fail("{}: found only {} distinct samples of {} requested after {} draws", t.name, n, count, max_draws);
    kind.draw(t, rng, X.data() + n * len_x, y.data());
    if (seen.insert(n).second) n++;
  }
  X.resize(size_t(count) * len_x);
  // Shuffle the rows (Fisher-Yates) before the caller splits them.
  std::vector<int64_t> tmp(len_x);
  for (int64_t i = count - 1; i > 0; i--) {
    int64_t j = int64_t(rng.below(uint64_t(i + 1)));
    if (j == i) continue;
    std::swap_ranges(X.begin() + i * len_x, X.begin() + (i + 1) * len_x, X.begin() + j * len_x);
  }
  return X;
}



void prepare_out_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) fail("output path {} exists and is not a directory", dir);
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create output directory {}: {}", dir, ec.message());
  if (::access(dir.c_str(), W_OK) != 0) fail("output directory {} is not writable", dir);
}

std::string dataset_meta_yaml(const TaskOptions& t, const SplitSizes& sizes, const FileSums& hashes,
                              const MetaProvenance& from) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "rmt_version" << YAML::Value << RMT_VERSION;
  out << YAML::Key << "task" << YAML::Value << t.name;
  out << YAML::Key << "kind" << YAML::Value << t.kind;
  out << YAML::Key << "file_prefix" << YAML::Value << t.name;
  out << YAML::Key << "options" << YAML::Value << YAML::Flow << YAML::BeginMap;
  const TaskKindTraits& kind = task_kind(t.kind);
  for (const TaskOptionInfo& info : task_option_info()) {
    if (!has_option(kind, info.bit) || !in_meta(info)) continue;
    out << YAML::Key << info.key << YAML::Value;
    if (info.text) out << t.*info.text;
    else out << t.*info.value;
  }
  // What made the noise, so that a user can see it (the text is not needed to read the dataset).
  if (t.noise == "text")
    out << YAML::Key << "noise_text" << YAML::Value << t.noise_text << YAML::Key << "noise_text_sha256" << YAML::Value
        << t.noise_text_sha256;
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
  if (kind.has_unscored_targets && task_unscored_targets(t))  // imported; absent: none (as before)
    out << YAML::Key << "unscored_targets" << YAML::Value << true;
  if (from.seed) {
    out << YAML::Key << "seed" << YAML::Value << *from.seed;
    out << YAML::Key << "prng" << YAML::Value << "std::mt19937_64, rejection-sampled bounded ints (tasks/rng.h)";
  }
  out << YAML::Key << "counts" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "train"
      << YAML::Value << sizes.train << YAML::Key << "val" << YAML::Value << sizes.val << YAML::Key << "test"
      << YAML::Value << sizes.test << YAML::EndMap;
  auto sums = [&](const FileSums& files) {
    out << YAML::BeginMap;
    for (auto& [name, hex] : files) out << YAML::Key << name << YAML::Value << hex;
    out << YAML::EndMap;
  };
  out << YAML::Key << "sha256" << YAML::Value;
  sums(hashes);
  if (!from.source_dir.empty()) {
    out << YAML::Key << "source" << YAML::Comment("the arrays imported (rmt data import)") << YAML::Value
        << YAML::BeginMap << YAML::Key << "dir" << YAML::Value << from.source_dir << YAML::Key << "sha256"
        << YAML::Value;
    sums(from.source_sha256);
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void write_split_files(const std::string& out_dir, const std::string& prefix, const std::string& split, int64_t n,
                       const int64_t* x, int len_x, const int64_t* y, int len_y, FileSums& hashes,
                       std::vector<std::string>& written) {
  const std::string x_bytes = npy_bytes_int64({n, len_x}, x);
  const std::string y_bytes = npy_bytes_int64({n, len_y}, y);
  for (auto [which, bytes] : {std::pair{"X", &x_bytes}, std::pair{"y", &y_bytes}}) {
    const std::string path = dataset_file(out_dir, prefix, split, which);
    write_file_atomic(path, *bytes);
    hashes.push_back({fs::path(path).filename().string(), sha256_hex(*bytes)});
    written.push_back(path);
  }
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
  // Options with a default (sqeq's range) are part of what limits the count: name them when one differs.
  std::string what = t.name, with_defaults;
  bool differs = false;
  for (const TaskOptionInfo& info : task_option_info())
    if (has_option(task_kind(t.kind), info.bit) && info.fallback && info.flag) {
      with_defaults += fmt::format(" --{} {}", info.flag, t.*info.value);
      differs = differs || t.*info.value != *info.fallback;
    }
  if (differs) what += with_defaults;
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
  if (!r.check_only || task_kind(t.kind).count_is_estimate) X = generate_unique_x(t, s.total(), r.seed);
  if (r.check_only) return GenerateResult();
  prepare_out_dir(r.out_dir);
  // Remove the old meta first: until the new one is written last, the directory is visibly incomplete.
  std::error_code ec;
  fs::remove(meta_path, ec);

  const int len_x = task_len_x(t), len_y = task_len_y(t);
  GenerateResult result;
  if (const auto notes = task_kind(t.kind).generation_notes) result.notes = notes(t, X, s.total());

  FileSums hashes;
  const int64_t counts[3] = {s.train, s.val, s.test};
  int64_t row0 = 0;
  for (int k = 0; k < 3; k++) {
    const int64_t n = counts[k];
    std::vector<int64_t> y(size_t(n) * len_y);
    const int64_t* x = X.data() + row0 * len_x;
    for (int64_t i = 0; i < n; i++) target_from_x(t, x + i * len_x, y.data() + i * len_y);
    write_split_files(r.out_dir, t.name, kSplits[k], n, x, len_x, y.data(), len_y, hashes, result.files);
    row0 += n;
  }
  MetaProvenance from;
  from.seed = r.seed;
  write_file_atomic(meta_path, dataset_meta_yaml(t, s, hashes, from));
  result.files.push_back(meta_path);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace rmt
