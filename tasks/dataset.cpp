// Dataset directories: writing (generate), reading meta (meta.yaml or inferred from the authors'
// file names), the model's view of a split, and decoding samples for display.
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

#include <openssl/evp.h>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "build_info.h"
#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset_check.h"
#include "tasks/tasks.h"
#include "tasks/text.h"

namespace rmt {

namespace fs = std::filesystem;

const std::array<const char*, 3> kSplits = {"train", "val", "test"};

std::string dataset_file(const std::string& dir, const std::string& prefix, const std::string& split,
                         const std::string& which) {
  return (fs::path(dir) / fmt::format("{}_{}_{}.npy", prefix, split, which)).string();
}


// Output directory must exist (or be creatable) and be writable; nothing is written yet.
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

// Bytes of RAM the machine has (0 if unknown).
uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
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

std::string gigabytes(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

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
  const uint64_t ram = physical_memory_bytes();
  if (ram > 0 && memory > double(ram))
    fail("train {} + val {} + test {} samples of {} (X {} ids, y {} ids each) need about {} of memory to "
         "generate; this machine has {}", s.train, s.val, s.test, t.name, int(len_x), int(len_y), gigabytes(memory), gigabytes(double(ram)));
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
    fail("the dataset needs about {} of disk, but {} has {} free", gigabytes(disk), r.out_dir,
         gigabytes(double(*free_bytes)));
}

GenerateResult generate_dataset(const GenerateRequest& r) {
  const auto start = std::chrono::steady_clock::now();
  const TaskOptions& t = r.task;
  const SplitSizes& s = r.sizes;
  check_generate_sizes(r);
  prepare_out_dir(r.out_dir);
  const std::string meta_path = (fs::path(r.out_dir) / "meta.yaml").string();
  std::vector<std::string> targets = {meta_path};
  for (const char* split : kSplits)
    for (const char* which : {"X", "y"}) targets.push_back(dataset_file(r.out_dir, t.name, split, which));
  if (!r.force)
    for (const std::string& f : targets)
      if (fs::exists(f)) fail("{} already exists; pass --force to overwrite the dataset in {}", f, r.out_dir);
  // Remove the old meta first: until the new one is written last, the directory is visibly incomplete.
  std::error_code ec;
  fs::remove(meta_path, ec);

  const int len_x = task_len_x(t), len_y = task_len_y(t);
  std::vector<int64_t> X = generate_unique_x(t, s.total(), r.seed);
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

// ---- reading ------------------------------------------------------------------------------

// Shared with check.cpp and text.cpp (tasks/dataset_check.h) up to is_hex64.

const char* dtype_name(NpyDtype d) {
  switch (d) {
    case NpyDtype::int64: return "int64 (<i8)";
    case NpyDtype::int32: return "int32 (<i4)";
    case NpyDtype::uint8: return "uint8 (|u1)";
    case NpyDtype::float32: return "float32 (<f4)";
  }
  return "?";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

// The header of an .npy file from its first bytes only (the data is never read here).
NpyHeader read_header_only(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", path);
  std::string head(1 << 17, '\0');  // a version 1.0 header is at most 65545 bytes
  in.read(head.data(), std::streamsize(head.size()));
  head.resize(size_t(in.gcount()));
  return parse_npy_header(head, path);
}

// What a YAML node is, for messages.
std::string yaml_what(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  if (n.IsScalar()) return fmt::format("'{}'", n.Scalar());
  return n.IsSequence() ? "a list" : "a map";
}

// The entries of map `node` (`where` names it in messages: "" for the top level, "options." ...):
// fails on a key not in `known`, a key given twice, or a key of `required` missing.
std::map<std::string, YAML::Node> meta_map(const YAML::Node& node, const std::string& path, const std::string& where,
                                           const std::vector<std::string>& known,
                                           const std::vector<std::string>& required) {
  if (!node.IsMap())
    fail("{}: {} must be a map, got {}", path, where.empty() ? "the file" : where.substr(0, where.size() - 1),
         yaml_what(node));
  std::map<std::string, YAML::Node> entries;
  for (auto it : node) {
    const std::string key = it.first.IsScalar() ? it.first.Scalar() : yaml_what(it.first);
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      fail("{}: unknown key '{}{}' (known: {})", path, where, key, list.empty() ? "none" : list);
    }
    if (!entries.emplace(key, it.second).second) fail("{}: key '{}{}' appears twice", path, where, key);
  }
  for (const std::string& k : required)
    if (!entries.count(k)) fail("{}: missing key '{}{}'", path, where, k);
  return entries;
}

int64_t meta_int(const YAML::Node& n, const std::string& path, const std::string& key, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v))
    fail("{}: '{}' must be an integer, got {}", path, key, yaml_what(n));
  if (v < lo || v > hi) fail("{}: '{}' is {}, expected {}..{}", path, key, v, lo, hi);
  return v;
}

std::string meta_string(const YAML::Node& n, const std::string& path, const std::string& key) {
  if (!n.IsScalar()) fail("{}: '{}' must be a string, got {}", path, key, yaml_what(n));
  return n.Scalar();
}

bool meta_bool(const YAML::Node& n, const std::string& path, const std::string& key) {
  bool b = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, b))
    fail("{}: '{}' must be true or false, got {}", path, key, yaml_what(n));
  return b;
}

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::vector<std::pair<std::string, std::string>> meta_sha256_map(const YAML::Node& sums, const std::string& path) {
  if (!sums.IsMap()) fail("{}: 'sha256' must be a map of file names to sums, got {}", path, yaml_what(sums));
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it : sums) {
    const std::string name = meta_string(it.first, path, "sha256 file name");
    const std::string hex = meta_string(it.second, path, "sha256." + name);
    if (!is_hex64(hex)) fail("{}: 'sha256.{}' must be 64 lowercase hex digits, got '{}'", path, name, hex);
    for (auto& [other, _] : out)
      if (other == name) fail("{}: key 'sha256.{}' appears twice", path, name);
    out.push_back({name, hex});
  }
  return out;
}

namespace {

bool is_plain_name(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s)
    if (c == '/' || c == '\\' || c == '\0') return false;
  return true;
}

constexpr int kMaxLength = 100000;  // as resolve_task allows

DatasetMeta meta_from_yaml(const std::string& path) {
  YAML::Node y;
  try {
    y = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    fail("{}: not valid YAML: {}", path, e.what());
  }
  const std::vector<std::string> required = {"task", "kind", "file_prefix", "options", "vocab", "len_x", "len_y",
                                             "input_length", "answer_size", "stacked", "counts", "sha256"};
  std::vector<std::string> known = required;
  for (const char* k : {"rmt_version", "seed", "prng"}) known.push_back(k);  // provenance only
  auto e = meta_map(y, path, "", known, required);
  DatasetMeta m;
  m.from_meta_yaml = true;
  m.task = meta_string(e["task"], path, "task");
  std::string tasks_known;
  for (const std::string& n : task_names()) tasks_known += (tasks_known.empty() ? "" : ", ") + n;
  const std::vector<std::string> names = task_names();
  if (std::find(names.begin(), names.end(), m.task) == names.end())
    fail("{}: unknown task '{}' (known: {})", path, m.task, tasks_known);
  const TaskOptions preset = resolve_task(m.task);
  const bool base = m.task == preset.kind;  // copy, reverse, retrieval, sqeq: options are free
  m.kind = meta_string(e["kind"], path, "kind");
  m.file_prefix = meta_string(e["file_prefix"], path, "file_prefix");
  if (!is_plain_name(m.file_prefix))
    fail("{}: 'file_prefix' must be a plain file name part, got '{}'", path, m.file_prefix);

  // options: those of the task's kind, all present (sqeq's range may be absent: meta.yaml written
  // before it existed, the paper's range).
  std::vector<std::string> option_keys, required_options;
  if (preset.kind == "copy" || preset.kind == "reverse") option_keys = {"length", "symbols"};
  if (preset.kind == "retrieval") option_keys = {"pairs"};
  if (preset.kind != "sqeq") required_options = option_keys;
  else option_keys = {"max_root", "max_alpha"};
  auto o = meta_map(e["options"], path, "options.", option_keys, required_options);
  m.length = preset.length;
  m.symbols = preset.symbols;
  m.pairs = preset.pairs;
  // A base task's options define it and must be in range; a preset's are compared by the checker.
  auto option = [&](const char* key, int lo, int hi) {
    return int(meta_int(o[key], path, std::string("options.") + key, base ? lo : INT32_MIN, base ? hi : INT32_MAX));
  };
  if (o.count("length")) m.length = option("length", 1, kMaxLength);
  if (o.count("symbols")) m.symbols = option("symbols", 1, 36);
  if (o.count("pairs")) m.pairs = option("pairs", 1, 10);
  if (preset.kind == "sqeq") {
    m.max_root = o.count("max_root") ? option("max_root", INT32_MIN, INT32_MAX) : kSqeqDefaultMaxRoot;
    m.max_alpha = o.count("max_alpha") ? option("max_alpha", INT32_MIN, INT32_MAX) : kSqeqDefaultMaxAlpha;
    try {
      check_sqeq_range(m.max_root, m.max_alpha, "options.max_root", "options.max_alpha");
    } catch (const Error& err) {
      fail("{}: {}", path, err.what());
    }
  }

  // vocab: ids 0..n-1, each once, to symbols.
  const YAML::Node& vocab = e["vocab"];
  if (!vocab.IsMap() || vocab.size() == 0)
    fail("{}: 'vocab' must be a map of ids 0, 1, ... to symbols, got {}", path, yaml_what(vocab));
  m.vocab.assign(vocab.size(), "");
  std::vector<bool> seen(vocab.size(), false);
  for (auto it : vocab) {
    int64_t id = -1;
    if (!it.first.IsScalar() || !YAML::convert<int64_t>::decode(it.first, id) || id < 0 ||
        id >= int64_t(vocab.size()) || seen[size_t(id)])
      fail("{}: 'vocab' must map each id 0..{} once, found key {}", path, vocab.size() - 1, yaml_what(it.first));
    seen[size_t(id)] = true;
    m.vocab[size_t(id)] = meta_string(it.second, path, fmt::format("vocab.{}", id));
  }
  m.len_x = int(meta_int(e["len_x"], path, "len_x", INT32_MIN, INT32_MAX));
  m.len_y = int(meta_int(e["len_y"], path, "len_y", INT32_MIN, INT32_MAX));
  m.input_length = int(meta_int(e["input_length"], path, "input_length", INT32_MIN, INT32_MAX));
  m.answer_size = int(meta_int(e["answer_size"], path, "answer_size", INT32_MIN, INT32_MAX));
  m.stacked = meta_bool(e["stacked"], path, "stacked");
  if (e.count("seed")) {
    uint64_t seed = 0;
    if (!e["seed"].IsScalar() || !YAML::convert<uint64_t>::decode(e["seed"], seed))
      fail("{}: 'seed' must be an integer in 0..2^64-1, got {}", path, yaml_what(e["seed"]));
    m.seed = seed;
  }
  if (e.count("rmt_version")) meta_string(e["rmt_version"], path, "rmt_version");
  if (e.count("prng")) meta_string(e["prng"], path, "prng");
  auto c = meta_map(e["counts"], path, "counts.", {"train", "val", "test"}, {"train", "val", "test"});
  for (int k = 0; k < 3; k++)
    m.counts[k] = meta_int(c[kSplits[k]], path, std::string("counts.") + kSplits[k], 0, INT64_MAX);
  m.sha256 = meta_sha256_map(e["sha256"], path);
  return m;
}

// The authors' directories hold only {task}_{split}_{X|y}.npy: the prefix names the task
// (copy, copy120, reverse120, retrieval, sqeq_cd ...) and, where the task leaves it open, the
// X header gives the length (copy/reverse) or the number of pairs (retrieval).
DatasetMeta meta_from_file_names(const std::string& dir) {
  std::set<std::string> prefixes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    for (const char* split : kSplits) {
      const std::string tail = fmt::format("_{}_X.npy", split);
      if (f.size() > tail.size() && f.compare(f.size() - tail.size(), tail.size(), tail) == 0)
        prefixes.insert(f.substr(0, f.size() - tail.size()));
    }
  }
  if (ec) fail("cannot read dataset directory {}: {}", dir, ec.message());
  if (prefixes.empty()) fail("{}: no meta.yaml and no {{task}}_{{split}}_X.npy files", dir);
  if (prefixes.size() > 1)
    fail("{}: no meta.yaml and files of several tasks ('{}', '{}'...)", dir, *prefixes.begin(), *std::next(prefixes.begin()));
  DatasetMeta m;
  m.file_prefix = m.task = *prefixes.begin();
  const std::string& p = m.file_prefix;
  auto starts = [&](const char* s) { return p.rfind(s, 0) == 0; };
  m.kind = starts("copy") ? "copy" : starts("reverse") ? "reverse" : starts("retrieval") ? "retrieval"
         : starts("sqeq") ? "sqeq" : "";
  if (m.kind.empty())
    fail("{}: cannot infer the task from file prefix '{}' (expected copy*, reverse*, retrieval*, sqeq*)", dir, p);
  const std::vector<std::string> names = task_names();
  const bool preset = std::find(names.begin(), names.end(), p) != names.end();
  if (preset && p != m.kind) {
    // copy120 ...: the preset fixes everything (docs/paper.md §1).
    const TaskOptions t = resolve_task(p);
    m.length = t.length;
    m.symbols = t.symbols;
  } else if (m.kind != "sqeq") {
    std::string x_path;
    for (const char* split : kSplits)
      if (fs::exists(dataset_file(dir, p, split, "X"))) {
        x_path = dataset_file(dir, p, split, "X");
        break;
      }
    const NpyHeader hx = read_header_only(x_path);
    if (hx.shape.size() != 2)
      fail("{}: shape is {}, expected [N, columns] (2-D); the task's size is read from it", x_path, shape_text(hx.shape));
    const int64_t cols = hx.shape[1];
    if (m.kind == "retrieval") {
      if (cols < 3 || cols > 21 || cols % 2 == 0)
        fail("{}: {} columns, but retrieval X has 2 * pairs + 1 columns with 1..10 pairs (3, 5, ..., 21)", x_path, cols);
      m.pairs = int(cols - 1) / 2;
    } else {
      if (cols < 1 || cols > kMaxLength)
        fail("{}: {} columns, but {} X has 1..{} columns (one per symbol)", x_path, cols, m.kind, kMaxLength);
      m.length = int(cols);
      // docs/paper.md §1: the L=24 sets use 10 symbols (vocab 12), the long ones (copy120 ...) 8.
      m.symbols = p == m.kind ? 10 : 8;
    }
  }
  if (m.kind == "sqeq") m.max_root = kSqeqDefaultMaxRoot, m.max_alpha = kSqeqDefaultMaxAlpha;  // the paper's
  m.from_meta_yaml = false;
  DatasetMeta implied = implied_meta(m);
  implied.from_meta_yaml = false;
  return implied;
}

}  // namespace

TaskOptions task_of_meta(const DatasetMeta& meta) {
  const std::vector<std::string> names = task_names();
  if (std::find(names.begin(), names.end(), meta.task) == names.end())  // the authors' sqeq_cd ...
    return TaskOptions{meta.task, meta.kind, meta.length, meta.symbols, meta.pairs, meta.max_root, meta.max_alpha};
  TaskOptions t = resolve_task(meta.task);  // the kind is the task's, whatever meta.yaml says
  if (t.name != t.kind) return t;           // a preset (copy120 ...): its own values
  if (t.kind == "copy" || t.kind == "reverse") {
    t.length = meta.length;
    t.symbols = meta.symbols;
  }
  if (t.kind == "retrieval") t.pairs = meta.pairs;
  if (t.kind == "sqeq") t.max_root = meta.max_root, t.max_alpha = meta.max_alpha;
  return t;
}

DatasetMeta implied_meta(const DatasetMeta& raw) {
  const TaskOptions t = task_of_meta(raw);
  DatasetMeta m = raw;
  m.kind = t.kind;
  m.length = t.length;
  m.symbols = t.symbols;
  m.pairs = t.pairs;
  m.max_root = t.max_root;
  m.max_alpha = t.max_alpha;
  m.vocab = task_vocab(t);
  m.len_x = task_len_x(t);
  m.len_y = task_len_y(t);
  m.stacked = task_stacked(t);
  m.input_length = m.stacked ? m.len_x + m.len_y - 1 : m.len_x;
  m.answer_size = task_answer_size(t);
  return m;
}

void check_meta_values(const std::string& dir, const DatasetMeta& raw, const DatasetMeta& implied, Violations& v) {
  if (!raw.from_meta_yaml) return;
  const std::string path = (fs::path(dir) / "meta.yaml").string();
  auto differs = [&](const std::string& key, const std::string& got, const std::string& want) {
    if (got != want) v.add(fmt::format("{}: {} is {}, but task {} implies {}", path, key, got, raw.task, want));
  };
  auto num = [](int64_t x) { return fmt::format("{}", x); };
  auto str = [](const std::string& s) { return fmt::format("'{}'", s); };
  differs("kind", str(raw.kind), str(implied.kind));
  differs("file_prefix", str(raw.file_prefix), str(raw.task));
  if (implied.kind == "copy" || implied.kind == "reverse") {
    differs("options.length", num(raw.length), num(implied.length));
    differs("options.symbols", num(raw.symbols), num(implied.symbols));
  }
  if (implied.kind == "retrieval") differs("options.pairs", num(raw.pairs), num(implied.pairs));
  if (raw.vocab.size() != implied.vocab.size()) {
    differs("the vocab size", num(int64_t(raw.vocab.size())), num(int64_t(implied.vocab.size())));
  } else {
    for (size_t i = 0; i < raw.vocab.size(); i++)
      if (raw.vocab[i] != implied.vocab[i]) {
        differs(fmt::format("vocab.{}", i), str(raw.vocab[i]), str(implied.vocab[i]));
        break;  // one is enough to say the vocabularies disagree
      }
  }
  differs("len_x", num(raw.len_x), num(implied.len_x));
  differs("len_y", num(raw.len_y), num(implied.len_y));
  differs("input_length", num(raw.input_length), num(implied.input_length));
  differs("answer_size", num(raw.answer_size), num(implied.answer_size));
  differs("stacked", raw.stacked ? "true" : "false", implied.stacked ? "true" : "false");
  // sha256: one entry for each of the six files, no other.
  std::vector<std::string> files;
  for (const char* split : kSplits)
    for (const char* which : {"X", "y"}) files.push_back(fs::path(dataset_file(dir, raw.file_prefix, split, which)).filename().string());
  for (const std::string& f : files) {
    bool found = false;
    for (auto& [name, _] : raw.sha256) found = found || name == f;
    if (!found) v.add(fmt::format("{}: sha256 has no entry for {}", path, f));
  }
  for (auto& [name, _] : raw.sha256)
    if (std::find(files.begin(), files.end(), name) == files.end())
      v.add(fmt::format("{}: sha256 names '{}', which is not a file of this dataset", path, name));
}

// The header of one [N, cols] int64 array; returns N or -1 after adding a violation.
static int64_t check_matrix_header(const std::string& path, int cols, const std::string& task, Violations& v) {
  NpyHeader h;
  uint64_t file_size = 0;
  try {
    std::error_code ec;
    file_size = fs::file_size(path, ec);
    if (ec) fail("{}: cannot read its size: {}", path, ec.message());
    h = read_header_only(path);
  } catch (const Error& e) {
    v.add(e.what());
    return -1;
  }
  if (h.dtype != NpyDtype::int64) {
    v.add(fmt::format("{}: dtype is {}, expected int64 (<i8)", path, dtype_name(h.dtype)));
    return -1;
  }
  if (h.shape.size() != 2 || h.shape[1] != cols) {
    v.add(fmt::format("{}: shape is {}, but task {} implies [N, {}]", path, shape_text(h.shape), task, cols));
    return -1;
  }
  const int64_t n = h.shape[0];
  if (n < 1) {
    v.add(fmt::format("{}: shape is {}: no samples (every split needs at least 1)", path, shape_text(h.shape)));
    return -1;
  }
  // n * cols * 8 + data_offset, without overflow: a shape may claim more than any file holds.
  const uint64_t per_row = uint64_t(cols) * 8;
  if (uint64_t(n) > (UINT64_MAX - h.data_offset) / per_row || uint64_t(n) * per_row + h.data_offset != file_size) {
    const bool huge = uint64_t(n) > (UINT64_MAX - h.data_offset) / per_row;
    v.add(fmt::format("{}: shape {} needs {} bytes of data, the file holds {}", path, shape_text(h.shape),
                      huge ? std::string("more than 2^64") : fmt::format("{}", uint64_t(n) * per_row),
                      file_size >= h.data_offset ? file_size - h.data_offset : 0));
    return -1;
  }
  return n;
}

int64_t check_split_layout(const std::string& dir, const DatasetMeta& meta, const std::string& split, Violations& v) {
  const std::string x_path = dataset_file(dir, meta.file_prefix, split, "X");
  const std::string y_path = dataset_file(dir, meta.file_prefix, split, "y");
  const bool has_x = fs::is_regular_file(x_path), has_y = fs::is_regular_file(y_path);
  if (!has_x || !has_y) {
    v.add(fmt::format("{}: missing {} split ({} not found)", dir, split,
                      fs::path(has_x ? y_path : x_path).filename().string()));
    return -1;
  }
  const int64_t nx = check_matrix_header(x_path, meta.len_x, meta.task, v);
  const int64_t ny = check_matrix_header(y_path, meta.len_y, meta.task, v);
  if (nx < 0 || ny < 0) return -1;
  if (nx != ny) {
    v.add(fmt::format("{} has {} rows but {} has {}", x_path, nx, y_path, ny));
    return -1;
  }
  const int k = split == "train" ? 0 : split == "val" ? 1 : 2;
  if (meta.from_meta_yaml && meta.counts[k] != nx) {
    v.add(fmt::format("{}: counts.{} is {}, but {} has {} rows", (fs::path(dir) / "meta.yaml").string(), split,
                      meta.counts[k], fs::path(x_path).filename().string(), nx));
    return -1;
  }
  return nx;
}

void fail_no_dataset_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec))
    fail("dataset directory {} is a file, not a directory; give the directory rmt generate wrote "
         "(it holds meta.yaml and the split files)", dir);
  fail("dataset directory {} does not exist", dir);
}

DatasetMeta read_dataset_meta(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail_no_dataset_dir(dir);
  if (is_text_dataset(dir))
    fail("{} is a byte-level text dataset (meta.yaml kind: text, from `rmt generate text`), not a dataset of "
         "the algorithmic tasks (copy, reverse, retrieval, sqeq)", dir);
  const fs::path path = fs::path(dir) / "meta.yaml";
  if (fs::exists(path, ec)) {
    if (!fs::is_regular_file(path, ec)) fail("{} is not a regular file", path.string());
    return meta_from_yaml(path.string());
  }
  return meta_from_file_names(dir);
}

DatasetMeta load_dataset_meta(const std::string& dir) {
  const CheckResult r = check_task_dataset(dir);
  if (!r.ok) fail("{}", invalid_dataset_message(dir, r.violations));
  return implied_meta(read_dataset_meta(dir));
}

std::string invalid_dataset_message(const std::string& dir, const std::vector<std::string>& violations) {
  std::string text = fmt::format("{} is not a valid dataset:", dir);
  for (const std::string& v : violations) text += "\n  " + v;
  return text;
}

// X and y of one split of a meta whose values are the task's: layout checked first (fails with the
// invalid-dataset message), then read; nothing is indexed before both shapes are known to fit.
static void read_split(const std::string& dir, const DatasetMeta& meta, const std::string& split,
                       std::vector<int64_t>& X, std::vector<int64_t>& Y, int64_t& n) {
  if (split != "train" && split != "val" && split != "test") fail("unknown split '{}' (train, val, test)", split);
  Violations v;
  n = check_split_layout(dir, meta, split, v);
  if (n < 0) fail("{}", invalid_dataset_message(dir, v.list));
  read_checked_matrix(dataset_file(dir, meta.file_prefix, split, "X"), n, meta.len_x, X);
  read_checked_matrix(dataset_file(dir, meta.file_prefix, split, "y"), n, meta.len_y, Y);
}

void sample_model_view(bool stacked, const int64_t* x, int len_x, const int64_t* y, int len_y,
                       int32_t* input, int32_t* target) {
  if (!stacked) {
    for (int k = 0; k < len_x; ++k) input[k] = int32_t(x[k]), target[k] = int32_t(y[k]);
    return;
  }
  // S[k] for k < len_x + len_y
  auto s = [&](int k) { return int32_t(k < len_x ? x[k] : y[k - len_x]); };
  for (int k = 0; k + 1 < len_x + len_y; ++k) input[k] = s(k), target[k] = s(k + 1);
}

SampleSplit load_sample_split(const std::string& dir, const DatasetMeta& given, const std::string& split) {
  const DatasetMeta meta = implied_meta(given);
  std::vector<int64_t> X, Y;
  int64_t nx = 0;
  read_split(dir, meta, split, X, Y, nx);
  const int64_t cx = meta.len_x, cy = meta.len_y;
  const std::string x_path = dataset_file(dir, meta.file_prefix, split, "X");
  const std::string y_path = dataset_file(dir, meta.file_prefix, split, "y");
  // Every id that reaches the model is checked once, here.
  const int64_t vocab = int64_t(meta.vocab.size());
  int64_t max_id = -1;
  for (auto [ids, path, cols] : {std::tuple{&X, &x_path, cx}, std::tuple{&Y, &y_path, cy}})
    for (size_t i = 0; i < ids->size(); i++) {
      const int64_t id = (*ids)[i];
      if (id < 0 || id >= vocab)
        fail("{}: id {} at row {} is outside the vocabulary [0, {}) of task {}", *path, id, int64_t(i) / cols, vocab,
             meta.task);
      max_id = std::max(max_id, id);
    }
  SampleSplit s;
  s.n = nx;
  s.max_id = int32_t(max_id);
  // The model's view, one sample at a time (sample_model_view states the layout).
  s.seq_len = meta.stacked ? int(cx + cy) - 1 : int(cx);  // not stacked (sqeq): cx == cy
  s.input.resize(size_t(nx) * s.seq_len);
  s.target.resize(size_t(nx) * s.seq_len);
  for (int64_t i = 0; i < nx; i++)
    sample_model_view(meta.stacked, X.data() + i * cx, int(cx), Y.data() + i * cy, int(cy),
                      s.input.data() + i * s.seq_len, s.target.data() + i * s.seq_len);
  return s;
}

// Reads up to n bytes; fails on a read error.
size_t read_some(std::ifstream& in, char* data, size_t n, const std::string& path) {
  in.read(data, std::streamsize(n));
  if (in.bad()) fail("cannot read {}", path);
  return size_t(in.gcount());
}

// sha256 of a file, read in 1 MiB chunks (a split of copy360 is 750 MB).
std::string file_sha256_hex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", path);
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  while (size_t got = read_some(in, buf.data(), buf.size(), path)) sha.update(buf.data(), got);
  return sha.hex();
}


std::string read_checked_matrix(const std::string& path, int64_t n, int cols, std::vector<int64_t>& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", path);
  std::string head(1 << 17, '\0');
  head.resize(read_some(in, head.data(), head.size(), path));
  const NpyHeader h = parse_npy_header(head, path);
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  // The file may have been replaced since check_split_layout read its header.
  if (ec || h.dtype != NpyDtype::int64 || h.shape != std::vector<int64_t>{n, cols} ||
      size != h.data_offset + uint64_t(n) * uint64_t(cols) * 8)
    fail("{}: the file changed while it was read", path);
  Sha256 sha;
  sha.update(head.data(), h.data_offset);
  out.resize(size_t(n) * size_t(cols));
  char* dst = reinterpret_cast<char*>(out.data());
  size_t done = 0;
  const size_t total = out.size() * 8;
  // The part of the data already in `head`, then the rest straight into `out`.
  const size_t in_head = std::min(total, head.size() - h.data_offset);
  std::memcpy(dst, head.data() + h.data_offset, in_head);
  done = in_head;
  while (done < total) {
    const size_t got = read_some(in, dst + done, std::min<size_t>(total - done, 1 << 24), path);
    if (got == 0) fail("{}: the file changed while it was read", path);
    done += got;
  }
  sha.update(dst, total);
  char extra;
  if (read_some(in, &extra, 1, path) != 0) fail("{}: the file changed while it was read", path);
  return sha.hex();
}

std::string task_dataset_fingerprint(const std::string& dir) {
  const DatasetMeta meta = read_dataset_meta(dir);
  std::string text = "rmt dataset fingerprint v1\n";
  for (const char* split : kSplits)
    for (const char* which : {"X", "y"}) {
      const std::string path = dataset_file(dir, meta.file_prefix, split, which);
      if (!fs::is_regular_file(path)) fail("{}: missing dataset file (needed for the dataset's fingerprint)", path);
      text += fmt::format("{} {}\n", fs::path(path).filename().string(), file_sha256_hex(path));
    }
  return sha256_hex(text);
}

// ---- display ------------------------------------------------------------------------------

std::string decode_ids(const DatasetMeta& meta, const int64_t* ids, int n) {
  std::vector<std::string> parts;
  bool single = true;
  for (int i = 0; i < n; i++) {
    std::string s = ids[i] >= 0 && ids[i] < int64_t(meta.vocab.size()) ? meta.vocab[ids[i]]
                                                                       : fmt::format("<{}?>", ids[i]);
    single = single && s.size() == 1;
    parts.push_back(s);
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); i++) out += (i && !single ? " " : "") + parts[i];
  return out;
}

// Text of one sqeq block: the ids up to the first pad.
static std::string sqeq_block(const DatasetMeta& meta, const int64_t* ids) {
  int n = 0;
  while (n < kSqeqBlock && ids[n] != 0) n++;
  return decode_ids(meta, ids, n);
}

std::vector<std::string> show_samples(const std::string& dir, const std::string& split, int n) {
  if (split != "train" && split != "val" && split != "test") fail("unknown split '{}' (train, val, test)", split);
  // meta.yaml must agree with the task (the header line and the decoding rely on it); rows are
  // shown as they are, ids outside the vocabulary as <id?>, so a broken row can be looked at.
  const DatasetMeta raw = read_dataset_meta(dir);
  const DatasetMeta meta = implied_meta(raw);
  Violations v;
  check_meta_values(dir, raw, meta, v);
  if (v.total > 0) fail("{}", invalid_dataset_message(dir, v.list));
  std::vector<int64_t> X, Y;
  int64_t nx = 0;
  read_split(dir, meta, split, X, Y, nx);
  const int64_t ny = nx, cx = meta.len_x, cy = meta.len_y;
  std::vector<std::string> lines;
  lines.push_back(fmt::format("{} {} split: {} samples, X [{}, {}], y [{}, {}]; answer = last {} target ids{}", meta.task,
                              split, nx, nx, cx, ny, cy, meta.answer_size,
                              meta.kind == "sqeq" ? " (blocks 2-6)" : " (after '|')"));
  for (int64_t i = 0; i < std::min<int64_t>(n, std::min(nx, ny)); i++) {
    const int64_t* x = X.data() + i * cx;
    const int64_t* y = Y.data() + i * cy;
    if (meta.kind == "sqeq" && cx == kSqeqBlock * kSqeqBlocks) {
      // Blocks joined by " / "; the answer (what the model predicts) starts after "|".
      std::string text = sqeq_block(meta, x) + "  |  ";
      for (int j = 1; j < kSqeqBlocks; j++) text += (j > 1 ? " / " : "") + sqeq_block(meta, x + j * kSqeqBlock);
      lines.push_back(fmt::format("#{:<3} {}", i, text));
    } else if (meta.kind == "retrieval" && cx % 2 == 1) {
      // Key-value pairs, then the query key; y = "?" then the queried value.
      std::string pairs;
      for (int k = 0; k + 1 < cx; k += 2) pairs += decode_ids(meta, x + k, 2) + " ";
      lines.push_back(fmt::format("#{:<3} X: {}query {}   y: {} | {}", i, pairs, decode_ids(meta, x + cx - 1, 1),
                                  decode_ids(meta, y, 1), decode_ids(meta, y + 1, int(cy) - 1)));
    } else {
      // y[0] is the start token ("<go>" or "?"); the answer follows it.
      lines.push_back(fmt::format("#{:<3} X: {}   y: {} | {}", i, decode_ids(meta, x, int(cx)),
                                  decode_ids(meta, y, 1), decode_ids(meta, y + 1, int(cy) - 1)));
    }
  }
  return lines;
}

}  // namespace rmt
