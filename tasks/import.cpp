// `rmt data import`: a user's NAME_{split}_{X,y}.npy checked, then written as an imported dataset.
#include "tasks/import.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "lib/files/output_safety.h"
#include "tasks/dataset_check.h"
#include "tasks/generate.h"
#include "tasks/imported.h"
#include "tasks/task_kind.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

// One source array as read: any integer dtype, widened to int64.
struct SourceArray {
  std::string path, file;  // full path; file name (as messages and meta.yaml name it)
  std::vector<int64_t> ids;
  int64_t rows = 0, cols = 0;
  std::string sha256;
  NpyDtype dtype = NpyDtype::int64;
};

[[noreturn]] void fail_import(const std::string& src, const std::vector<std::string>& problems, int64_t total) {
  std::string text = fmt::format("{} cannot be imported:", src);
  for (const std::string& p : problems) text += "\n  " + p;
  if (total > int64_t(problems.size())) text += fmt::format("\n  ... {} problems in all", total);
  fail("{}", text);
}

// Letters, digits, '_', '-', '.': NAME becomes the file prefix and the task's name in tables.
bool is_task_name_text(const std::string& s) {
  if (s.empty() || s[0] == '.') return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

// NAME of the NAME_{split}_{X|y}.npy files in `src`: the one there is, or the one asked for.
std::string task_name_in(const std::string& src, const std::string& asked) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(src, ec)) {
    const std::string f = entry.path().filename().string();
    for (const char* split : kSplits)
      for (const char* which : {"X", "y"}) {
        const std::string tail = fmt::format("_{}_{}.npy", split, which);
        if (f.size() > tail.size() && f.compare(f.size() - tail.size(), tail.size(), tail) == 0)
          names.insert(f.substr(0, f.size() - tail.size()));
      }
  }
  if (ec) fail("cannot read source directory {}: {}", src, ec.message());
  std::string name = asked;
  if (name.empty()) {
    if (names.empty()) fail("{} holds no NAME_{{train,val,test}}_{{X,y}}.npy files to import", src);
    if (names.size() > 1)
      fail("{} holds the files of several tasks ('{}', '{}'...); choose one with --name", src, *names.begin(),
           *std::next(names.begin()));
    name = *names.begin();
  }
  if (!is_task_name_text(name))
    fail("task name '{}' (the files' prefix) must be letters, digits, '_', '-' and '.' (not first); rename the files",
         name);
  return name;
}

// The six arrays, each 2-D of integers with N >= 1 rows; X and y of a split with the same N, X of
// one width in every split, y too. Problems are collected, then reported together.
std::vector<SourceArray> read_source(const std::string& src, const std::string& name) {
  std::vector<SourceArray> arrays;  // train X, train y, val X, ...
  std::vector<std::string> problems;
  for (const char* split : kSplits) {
    for (const char* which : {"X", "y"}) {
      SourceArray a;
      a.path = dataset_file(src, name, split, which);
      a.file = fs::path(a.path).filename().string();
      try {
        if (!fs::exists(fs::symlink_status(a.path))) fail("{}: missing {} split ({} not found)", src, split, a.file);
        const std::string bytes = read_file(a.path);
        a.dtype = parse_npy_header(bytes, a.path).dtype;
        a.ids = parse_npy_int_matrix(bytes, a.path, a.rows, a.cols);
        a.sha256 = sha256_hex(bytes);
        if (a.rows < 1)
          fail("{}: shape [{}, {}]: no samples (every split needs at least 1)", a.path, a.rows, a.cols);
      } catch (const Error& e) {
        problems.push_back(e.what());
        a.rows = -1;
      }
      arrays.push_back(std::move(a));
    }
  }
  if (!problems.empty()) fail_import(src, problems, int64_t(problems.size()));
  for (size_t k = 0; k < 3; k++) {
    const SourceArray &x = arrays[2 * k], &y = arrays[2 * k + 1];
    if (x.rows != y.rows) problems.push_back(fmt::format("{} has {} rows but {} has {}", x.path, x.rows, y.path, y.rows));
    for (const SourceArray* a : {&x, &y}) {
      const SourceArray& train = arrays[a == &x ? 0 : 1];
      if (a->cols != train.cols)
        problems.push_back(fmt::format("{}: {} columns, but {} has {}: {} has one width in every split", a->path,
                                       a->cols, train.file, train.cols, a == &x ? "X" : "y"));
    }
  }
  if (!problems.empty()) fail_import(src, problems, int64_t(problems.size()));
  return arrays;
}

// --vocab FILE: one symbol per line, line k naming id k-1 (a last line break is optional; a '\r'
// before it is dropped).
std::vector<std::string> read_vocab_file(const std::string& path) {
  require_regular_file(path, "--vocab");
  const std::string text = read_file(path);
  std::vector<std::string> symbols;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    symbols.push_back(line);
    start = end + 1;
  }
  if (symbols.empty()) fail("--vocab {}: the file is empty; it needs one symbol per line (line k: id k-1)", path);
  return symbols;
}

// "0", "1", ... for ids 0..V-1, V = the largest id (or the padding id) + 1.
std::vector<std::string> inferred_vocab(const std::vector<SourceArray>& arrays, int pad_id) {
  int64_t largest = pad_id;
  const SourceArray* where = nullptr;
  for (const SourceArray& a : arrays)
    for (int64_t id : a.ids)
      if (id > largest) largest = id, where = &a;
  if (largest < 0) fail("no id is 0 or more: ids are 0, 1, ... (the vocabulary's indices)");
  if (largest >= kMaxInferredVocab)
    fail("{}: id {} would make a vocabulary of {} ids (inferred: 0 .. the largest id); name the symbols with "
         "--vocab FILE, or number them from 0", where ? where->path : "--pad-id", largest, largest + 1);
  std::vector<std::string> symbols;
  for (int64_t id = 0; id <= largest; id++) symbols.push_back(std::to_string(id));
  return symbols;
}

// y's unscored positions: -1 (rmt's mark, as `rmt generate mqar` writes) or -100 (PyTorch's
// ignore_index, as mad-lab and Zoology label them), written as -1. Returns how many there are; the
// first is named in *first ("FILE row r: y[i] = -100").
int64_t mark_unscored(std::vector<SourceArray>& arrays, std::string* first) {
  int64_t count = 0;
  for (size_t k = 1; k < arrays.size(); k += 2) {
    SourceArray& y = arrays[k];
    for (size_t i = 0; i < y.ids.size(); i++) {
      if (y.ids[i] != -1 && y.ids[i] != kIgnoreIndex) continue;
      if (count++ == 0)
        *first = fmt::format("{} row {}: y[{}] = {}", y.path, int64_t(i) / y.cols, int64_t(i) % y.cols, y.ids[i]);
      y.ids[i] = -1;
    }
  }
  return count;
}

}  // namespace

ImportResult import_dataset(const ImportRequest& r) {
  std::error_code ec;
  if (!fs::is_directory(r.source_dir, ec)) fail("source directory {} does not exist", r.source_dir);
  const std::string name = task_name_in(r.source_dir, r.name);
  std::vector<SourceArray> arrays = read_source(r.source_dir, name);
  std::string first_unscored;
  const int64_t unscored = mark_unscored(arrays, &first_unscored);
  if (unscored > 0 && !r.aligned)
    fail("{} marks a position as unscored ({} such in all), which needs --aligned (X and y of one width, y[i] the "
         "target at X's position i): in the stacked layout y's ids are also the model's inputs",
         first_unscored, unscored);

  // The task as meta.yaml will state it; its values checked as the flags name them.
  ImportResult result;
  TaskOptions t{name, "imported"};
  t.columns_x = int(std::min<int64_t>(arrays[0].cols, INT32_MAX));
  t.columns_y = int(std::min<int64_t>(arrays[1].cols, INT32_MAX));
  t.answer_positions = r.answer_size.value_or(t.columns_y);
  t.stacked_layout = !r.aligned;
  t.unscored = unscored > 0;
  result.unscored_positions = unscored;
  if (r.pad_id && *r.pad_id < 0) fail("--pad-id must be 0 or more (got {})", *r.pad_id);
  t.pad_id = r.pad_id.value_or(-1);
  result.vocab_inferred = r.vocab_file.empty();
  t.id_symbols = result.vocab_inferred ? inferred_vocab(arrays, t.pad_id) : read_vocab_file(r.vocab_file);
  if (const std::string problem = imported_options_problem(t, ImportedNames::flags); !problem.empty())
    fail("{}{}", result.vocab_inferred ? "" : fmt::format("--vocab {} (line k: id k-1): ", r.vocab_file), problem);

  DatasetMeta stated;
  stated.task = stated.file_prefix = name;
  stated.kind = t.kind;
  stated.len_x = t.columns_x, stated.len_y = t.columns_y, stated.answer_size = t.answer_positions;
  stated.stacked = t.stacked_layout, stated.vocab = t.id_symbols, stated.pad_id = t.pad_id;
  stated.unscored_targets = t.unscored;
  result.meta = implied_meta(stated);  // as every reader of the written dataset will see it

  // Every row as `rmt data check` judges it: ids in the vocabulary, no empty X, no X twice.
  Violations v;
  SeenX seen;
  for (size_t k = 0; k < 3; k++) seen.x_names[k] = arrays[2 * k].file;
  for (int k = 0; k < 3; k++) {
    const SourceArray &x = arrays[size_t(2 * k)], &y = arrays[size_t(2 * k + 1)];
    const SplitRows rows{k, x.file, y.file, &x.ids, &y.ids, x.rows};
    check_split_rows(result.meta, t, rows, seen, v, v.total, v.max);
  }
  if (v.total > 0) fail_import(r.source_dir, v.list, v.total);

  // Written as `rmt generate` writes: refused over a dataset without --force, meta.yaml last.
  const std::string meta_path = (fs::path(r.out_dir) / "meta.yaml").string();
  std::vector<std::string> targets = {meta_path};
  for (const char* split : kSplits)
    for (const char* which : {"X", "y"}) targets.push_back(dataset_file(r.out_dir, name, split, which));
  // The source arrays (and --vocab) first: --out SRC would write them over in int64 and record
  // the hashes of files no longer there, and --force, which the refusal below offers, would do it.
  if (same_file(r.out_dir, r.source_dir))
    fail("--out {}: is the source directory {}; importing there would write the dataset over your "
         "arrays (in int64): give --out a directory of its own", r.out_dir, r.source_dir);
  std::vector<NamedPath> outputs, inputs;
  for (const std::string& f : targets) outputs.push_back({"--out", f});
  for (const SourceArray& a : arrays) inputs.push_back({"SRC", a.path});
  if (!r.vocab_file.empty()) inputs.push_back({"--vocab", r.vocab_file});
  check_outputs_not_inputs(outputs, inputs);
  refuse_existing_outputs(targets, r.out_dir, r.force);
  prepare_out_dir(r.out_dir);
  fs::remove(meta_path, ec);  // until the new one is written, the directory is visibly incomplete
  FileSums hashes;
  MetaProvenance from;
  from.source_dir = fs::absolute(r.source_dir, ec).lexically_normal().string();
  SplitSizes sizes;
  int64_t* count[3] = {&sizes.train, &sizes.val, &sizes.test};
  for (int k = 0; k < 3; k++) {
    const SourceArray &x = arrays[size_t(2 * k)], &y = arrays[size_t(2 * k + 1)];
    *count[k] = x.rows;
    write_split_files(r.out_dir, name, kSplits[k], x.rows, x.ids.data(), t.columns_x, y.ids.data(), t.columns_y,
                      hashes, result.files);
    for (const SourceArray* a : {&x, &y}) {
      from.source_sha256.push_back({a->file, a->sha256});
      if (a->dtype != NpyDtype::int64) result.source_dtypes.push_back(fmt::format("{} {}", a->file, dtype_name(a->dtype)));
    }
  }
  write_file_atomic(meta_path, dataset_meta_yaml(t, sizes, hashes, from));
  result.files.push_back(meta_path);
  for (int k = 0; k < 3; k++) result.meta.counts[size_t(k)] = *count[k];
  return result;
}

}  // namespace rmt
