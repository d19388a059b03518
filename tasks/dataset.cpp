// Dataset directories: writing (generate), reading meta (meta.yaml or inferred from the authors'
// file names), the model's view of a split, and decoding samples for display.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include <openssl/evp.h>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "build_info.h"
#include "lib/error.h"
#include "lib/io.h"
#include "lib/npy.h"
#include "tasks/tasks.h"

namespace rmt {

namespace fs = std::filesystem;

const std::array<const char*, 3> kSplits = {"train", "val", "test"};

std::string dataset_file(const std::string& dir, const std::string& prefix, const std::string& split,
                         const std::string& which) {
  return (fs::path(dir) / fmt::format("{}_{}_{}.npy", prefix, split, which)).string();
}


// Output directory must exist (or be creatable) and be writable; nothing is written yet.
static void prepare_out_dir(const std::string& dir) {
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

GenerateResult generate_dataset(const GenerateRequest& r) {
  const auto start = std::chrono::steady_clock::now();
  const TaskOptions& t = r.task;
  const SplitSizes& s = r.sizes;
  if (s.train < 0 || s.val < 0 || s.test < 0) fail("split sizes must not be negative");
  if (s.total() < 1) fail("nothing to generate: train + val + test is 0");
  const int64_t possible = max_unique_samples(t);
  if (s.total() > possible)
    fail("{} samples requested (train {} + val {} + test {}) but {} has only {} distinct samples", s.total(),
         s.train, s.val, s.test, t.name, possible);
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

static DatasetMeta meta_from_yaml(const std::string& dir, const std::string& path) {
  DatasetMeta m;
  try {
    YAML::Node y = YAML::LoadFile(path);
    m.task = y["task"].as<std::string>();
    m.kind = y["kind"].as<std::string>();
    m.file_prefix = y["file_prefix"].as<std::string>();
    if (y["options"]["length"]) m.length = y["options"]["length"].as<int>();
    if (y["options"]["symbols"]) m.symbols = y["options"]["symbols"].as<int>();
    if (y["options"]["pairs"]) m.pairs = y["options"]["pairs"].as<int>();
    YAML::Node vocab = y["vocab"];
    m.vocab.resize(vocab.size());
    for (size_t i = 0; i < vocab.size(); i++) m.vocab[i] = vocab[i].as<std::string>();
    m.len_x = y["len_x"].as<int>();
    m.len_y = y["len_y"].as<int>();
    m.answer_size = y["answer_size"].as<int>();
    m.stacked = y["stacked"].as<bool>();
    if (y["seed"]) m.seed = y["seed"].as<int64_t>();
    for (auto it : y["sha256"]) m.sha256.push_back({it.first.as<std::string>(), it.second.as<std::string>()});
  } catch (const YAML::Exception& e) {
    fail("{}: invalid meta.yaml: {}", path, e.what());
  }
  if (m.kind != "copy" && m.kind != "reverse" && m.kind != "retrieval" && m.kind != "sqeq")
    fail("{}: unknown task kind '{}'", path, m.kind);
  m.from_meta_yaml = true;
  return m;
}

// The authors' directories hold only {task}_{split}_{X|y}.npy: the prefix names the task
// (copy, copy120, reverse120, retrieval, sqeq_cd ...) and the X/y headers give the shapes.
static DatasetMeta meta_from_file_names(const std::string& dir) {
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
  if (prefixes.size() > 1) fail("{}: no meta.yaml and files of several tasks ({}...)", dir, *prefixes.begin());
  DatasetMeta m;
  m.file_prefix = m.task = *prefixes.begin();
  const std::string& p = m.file_prefix;
  auto starts = [&](const char* s) { return p.rfind(s, 0) == 0; };
  m.kind = starts("copy") ? "copy" : starts("reverse") ? "reverse" : starts("retrieval") ? "retrieval"
         : starts("sqeq") ? "sqeq" : "";
  if (m.kind.empty()) fail("{}: cannot infer the task from file prefix '{}' (expected copy*, reverse*, retrieval*, sqeq*)", dir, p);
  std::string x_path, y_path;
  for (const char* split : kSplits) {
    if (fs::exists(dataset_file(dir, p, split, "X"))) {
      x_path = dataset_file(dir, p, split, "X");
      y_path = dataset_file(dir, p, split, "y");
      break;
    }
  }
  NpyHeader hx = read_npy_header(x_path), hy = read_npy_header(y_path);
  if (hx.shape.size() != 2) fail("{}: expected a 2-D array", x_path);
  if (hy.shape.size() != 2) fail("{}: expected a 2-D array", y_path);
  m.len_x = int(hx.shape[1]);
  m.len_y = int(hy.shape[1]);
  if (m.kind == "copy" || m.kind == "reverse") {
    m.length = m.len_x;
    // FACTS §1: the L=24 sets use 10 symbols (vocab 12), the long ones (copy120 ...) 8 (vocab 10).
    m.symbols = p == m.kind ? 10 : 8;
  } else if (m.kind == "retrieval") {
    m.pairs = (m.len_x - 1) / 2;
  }
  TaskOptions t{m.task, m.kind, m.length, m.symbols, m.pairs};
  m.vocab = task_vocab(t);
  m.answer_size = task_answer_size(t);
  m.stacked = task_stacked(t);
  m.from_meta_yaml = false;
  return m;
}

DatasetMeta load_dataset_meta(const std::string& dir) {
  if (!fs::is_directory(dir)) fail("dataset directory {} does not exist", dir);
  const std::string path = (fs::path(dir) / "meta.yaml").string();
  if (fs::exists(path)) return meta_from_yaml(dir, path);
  return meta_from_file_names(dir);
}

LmSplit load_lm_split(const std::string& dir, const DatasetMeta& meta, const std::string& split) {
  const std::string x_path = dataset_file(dir, meta.file_prefix, split, "X");
  const std::string y_path = dataset_file(dir, meta.file_prefix, split, "y");
  int64_t nx, cx, ny, cy;
  std::vector<int64_t> X = read_npy_int_matrix(x_path, nx, cx);
  std::vector<int64_t> Y = read_npy_int_matrix(y_path, ny, cy);
  if (cx != meta.len_x) fail("{}: {} columns, meta says len_x {}", x_path, cx, meta.len_x);
  if (cy != meta.len_y) fail("{}: {} columns, meta says len_y {}", y_path, cy, meta.len_y);
  if (nx != ny) fail("{} has {} rows but {} has {}", x_path, nx, y_path, ny);
  const int64_t vocab = int64_t(meta.vocab.size());
  for (auto [ids, path] : {std::pair{&X, &x_path}, std::pair{&Y, &y_path}})
    for (size_t i = 0; i < ids->size(); i++)
      if ((*ids)[i] < 0 || (*ids)[i] >= vocab)
        fail("{}: id {} at row {} is outside the vocabulary [0, {})", *path, (*ids)[i], int64_t(i) / (path == &x_path ? cx : cy), vocab);
  LmSplit s;
  s.n = nx;
  if (meta.stacked) {
    // S = concat(X, y); input = S[:-1], target = S[1:].
    const int len_s = int(cx + cy);
    s.seq_len = len_s - 1;
    s.input.resize(size_t(nx) * s.seq_len);
    s.target.resize(size_t(nx) * s.seq_len);
    std::vector<int64_t> row(len_s);
    for (int64_t i = 0; i < nx; i++) {
      std::copy(X.begin() + i * cx, X.begin() + (i + 1) * cx, row.begin());
      std::copy(Y.begin() + i * cy, Y.begin() + (i + 1) * cy, row.begin() + cx);
      for (int k = 0; k < s.seq_len; k++) {
        s.input[i * s.seq_len + k] = int32_t(row[k]);
        s.target[i * s.seq_len + k] = int32_t(row[k + 1]);
      }
    }
  } else {
    if (cx != cy) fail("{}: unstacked task needs X and y of equal width ({} vs {})", dir, cx, cy);
    s.seq_len = int(cx);
    s.input.assign(X.begin(), X.end());
    s.target.assign(Y.begin(), Y.end());
  }
  return s;
}

// sha256 of a file, read in 1 MiB chunks (a split of copy360 is 750 MB).
static std::string file_sha256_hex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", path);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    fail("sha256 failed");
  }
  std::vector<char> buf(1 << 20);
  bool ok = true;
  while (ok && in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    if (in.gcount() > 0) ok = EVP_DigestUpdate(ctx, buf.data(), size_t(in.gcount())) == 1;
  }
  const bool read_error = in.bad();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ok = ok && EVP_DigestFinal_ex(ctx, digest, &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (read_error) fail("cannot read {}", path);
  if (!ok) fail("sha256 failed");
  std::string hex;
  for (unsigned int i = 0; i < len; i++) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::string dataset_fingerprint(const std::string& dir) {
  const DatasetMeta meta = load_dataset_meta(dir);
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
  DatasetMeta meta = load_dataset_meta(dir);
  if (split != "train" && split != "val" && split != "test") fail("unknown split '{}' (train, val, test)", split);
  int64_t nx, cx, ny, cy;
  std::vector<int64_t> X = read_npy_int_matrix(dataset_file(dir, meta.file_prefix, split, "X"), nx, cx);
  std::vector<int64_t> Y = read_npy_int_matrix(dataset_file(dir, meta.file_prefix, split, "y"), ny, cy);
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
