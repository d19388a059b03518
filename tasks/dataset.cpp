// A dataset directory of an algorithmic task as training reads it: the split files checked
// and turned into the model's view, the dataset's fingerprint, and samples decoded for display.
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

#include <openssl/evp.h>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset_check.h"
#include "tasks/task_kind.h"
#include "tasks/text.h"

namespace rmt {

namespace fs = std::filesystem;

const std::array<const char*, 3> kSplits = {"train", "val", "test"};

std::string dataset_file(const std::string& dir, const std::string& prefix, const std::string& split,
                         const std::string& which) {
  return (fs::path(dir) / fmt::format("{}_{}_{}.npy", prefix, split, which)).string();
}

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
  for (const std::string& path : {x_path, y_path}) {
    const std::string problem = not_a_regular_file(path);
    if (problem.empty()) continue;
    // Absent: the split is missing; present (a directory, a FIFO ...): say what it is.
    if (!fs::exists(fs::symlink_status(path)))
      v.add(fmt::format("{}: missing {} split ({} not found)", dir, split, fs::path(path).filename().string()));
    else
      v.add(fmt::format("{}: {}", path, problem));
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

// The split's number of samples, once its files' layout is checked (fails with the
// invalid-dataset message).
static int64_t checked_split_rows(const std::string& dir, const DatasetMeta& meta, const std::string& split) {
  if (split != "train" && split != "val" && split != "test") fail("unknown split '{}' (train, val, test)", split);
  Violations v;
  const int64_t n = check_split_layout(dir, meta, split, v);
  if (n < 0) fail("{}", invalid_dataset_message(dir, v.list));
  return n;
}

// X and y of one split of a meta whose values are the task's: layout checked first, then read;
// nothing is indexed before both shapes are known to fit.
static void read_split(const std::string& dir, const DatasetMeta& meta, const std::string& split,
                       std::vector<int64_t>& X, std::vector<int64_t>& Y, int64_t& n) {
  n = checked_split_rows(dir, meta, split);
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

SampleSplit load_sample_split(const std::string& dir, const DatasetMeta& meta, const std::string& split) {
  // The whole split through the batch reader: one place checks the files and every id.
  SampleSplitReader reader(dir, meta, split);
  SampleSplit s;
  s.n = reader.n();
  s.seq_len = reader.seq_len();
  reader.read(0, int(s.n), s.input, s.target);
  for (const std::vector<int32_t>* ids : {&s.input, &s.target})  // input and target hold every id
    for (int32_t id : *ids) s.max_id = std::max(s.max_id, id);
  return s;
}

// Reads up to n bytes; fails on a read error.
size_t read_some(std::ifstream& in, char* data, size_t n, const std::string& path) {
  in.read(data, std::streamsize(n));
  if (in.bad()) fail("cannot read {}", path);
  return size_t(in.gcount());
}

SampleSplitReader::SampleSplitReader(const std::string& dir, const DatasetMeta& given, const std::string& split)
    : meta_(implied_meta(given)), n_(checked_split_rows(dir, meta_, split)) {
  seq_len_ = meta_.stacked ? meta_.len_x + meta_.len_y - 1 : meta_.len_x;  // as load_sample_split
  for (auto [f, which, cols] : {std::tuple{&x_, "X", meta_.len_x}, std::tuple{&y_, "y", meta_.len_y}}) {
    f->path = dataset_file(dir, meta_.file_prefix, split, which);
    f->cols = cols;
    require_regular_file(f->path);  // a FIFO would block the open; say what the path is instead
    f->in.open(f->path, std::ios::binary);
    if (!f->in) fail("cannot open {}", f->path);
    f->data_offset = read_npy_header(f->path).data_offset;
  }
}

void SampleSplitReader::read_rows(File& f, int64_t start, int count, std::vector<int64_t>& out) {
  out.resize(size_t(count) * size_t(f.cols));
  const size_t bytes = out.size() * sizeof(int64_t);
  f.in.clear();
  f.in.seekg(std::streamoff(f.data_offset + uint64_t(start) * uint64_t(f.cols) * 8));
  if (read_some(f.in, reinterpret_cast<char*>(out.data()), bytes, f.path) != bytes)
    fail("{}: the file changed while it was read (rows {} to {} are missing)", f.path, start, start + count - 1);
  const int64_t vocab = int64_t(meta_.vocab.size());
  const bool unscored = meta_.unscored_targets && &f == &y_;  // y's -1: a position not scored (mqar)
  for (size_t i = 0; i < out.size(); ++i)
    if ((out[i] < 0 || out[i] >= vocab) && !(unscored && out[i] == -1))
      fail("{}: id {} at row {} is outside the vocabulary [0, {}) of task {}", f.path, out[i],
           start + int64_t(i) / f.cols, vocab, meta_.task);
}

void SampleSplitReader::read(int64_t start, int count, std::vector<int32_t>& input, std::vector<int32_t>& target) {
  if (start < 0 || count < 0 || start + count > n_)
    fail("internal: rows {} to {} of a split of {}", start, start + count - 1, n_);
  read_rows(x_, start, count, xs_);
  read_rows(y_, start, count, ys_);
  input.resize(size_t(count) * size_t(seq_len_));
  target.resize(input.size());
  for (int i = 0; i < count; ++i)
    sample_model_view(meta_.stacked, xs_.data() + int64_t(i) * meta_.len_x, meta_.len_x,
                      ys_.data() + int64_t(i) * meta_.len_y, meta_.len_y,
                      input.data() + int64_t(i) * seq_len_, target.data() + int64_t(i) * seq_len_);
}

// sha256 of a file, read in 1 MiB chunks (a split of copy360 is 750 MB).
std::string file_sha256_hex(const std::string& path) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", path);
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  while (size_t got = read_some(in, buf.data(), buf.size(), path)) sha.update(buf.data(), got);
  return sha.hex();
}


std::string read_checked_matrix(const std::string& path, int64_t n, int cols, std::vector<int64_t>& out) {
  require_regular_file(path);
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
      if (!fs::exists(fs::symlink_status(path)))
        fail("{}: missing dataset file (needed for the dataset's fingerprint)", path);
      require_regular_file(path);  // present but a directory, a FIFO ...: say what it is
      text += fmt::format("{} {}\n", fs::path(path).filename().string(), file_sha256_hex(path));
    }
  return sha256_hex(text);
}

// ---- display ------------------------------------------------------------------------------

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
  const TaskKindTraits& kind = task_kind(meta.kind);
  lines.push_back(fmt::format("{} {} split: {} samples, X [{}, {}], y [{}, {}]; answer = last {} target ids{}", meta.task,
                              split, nx, nx, cx, ny, cy, meta.answer_size, kind.answer_note));
  for (int64_t i = 0; i < std::min<int64_t>(n, std::min(nx, ny)); i++)
    lines.push_back(fmt::format("#{:<3} {}", i, kind.show_row(meta, X.data() + i * cx, int(cx), Y.data() + i * cy, int(cy))));
  return lines;
}

}  // namespace rmt
