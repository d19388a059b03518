// `rmt data check`: shapes, dtype, id ranges, every task invariant, no X in two splits, sha256.
#include <filesystem>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset_check.h"
#include "tasks/check.h"
#include "tasks/task_kind.h"
#include "tasks/text.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

// Task invariants of one row (the kind's, then the target where the kind computes one); empty
// string when it is valid.
std::string check_row(const DatasetMeta& meta, const TaskOptions& task, const int64_t* x, const int64_t* y,
                      std::vector<int64_t>& want) {
  const TaskKindTraits& kind = task_kind(task.kind);
  std::string why = kind.row_problem(task, meta, x, y);
  if (!why.empty() || !kind.target) return why;  // no target: y is data (imported)
  kind.target(task, x, want.data());
  for (int i = 0; i < meta.len_y; i++)
    if (y[i] != want[i]) return fmt::format("y[{}] = {}, expected {}", i, y[i], want[i]);
  return "";
}

}  // namespace

void check_split_rows(const DatasetMeta& meta, const TaskOptions& task, const SplitRows& split, SeenX& seen,
                      Violations& v, int64_t counted_from, int max_violations) {
  const int64_t vocab = int64_t(meta.vocab.size());
  std::vector<int64_t> want(size_t(meta.len_y));
  for (int64_t r = 0; r < split.n && v.total - counted_from < max_violations; r++) {
    const int64_t* x = split.xs->data() + r * meta.len_x;
    const int64_t* y = split.ys->data() + r * meta.len_y;
    std::string why;
    const std::string* file = &split.x_name;  // the file at fault: y's for an id of y, else X's
    for (int i = 0; i < meta.len_x && why.empty(); i++)
      if (x[i] < 0 || x[i] >= vocab) why = fmt::format("X[{}] = {} outside the vocabulary [0, {})", i, x[i], vocab);
    for (int i = 0; i < meta.len_y && why.empty(); i++)
      if ((y[i] < 0 || y[i] >= vocab) && !(y[i] == -1 && meta.unscored_targets)) {  // -1: not scored (mqar)
        why = fmt::format("y[{}] = {} outside the vocabulary [0, {})", i, y[i], vocab);
        file = &split.y_name;
      }
    if (why.empty() && meta.unscored_targets) {  // a row that scores nothing would teach and measure nothing
      bool scored = false;
      for (int i = meta.len_y - meta.answer_size; i < meta.len_y && !scored; i++) scored = y[i] != -1;
      if (!scored) {
        why = meta.answer_size == meta.len_y
                  ? std::string("y is -1 (unscored) at every position: a row needs at least one scored position")
                  : fmt::format("y is -1 (unscored) at every answer position (the last {}): a row needs at least "
                                "one scored position", meta.answer_size);
        file = &split.y_name;
      }
    }
    if (why.empty()) why = check_row(meta, task, x, y, want);
    if (!why.empty()) v.add(fmt::format("{} row {}: {}", *file, r, why));
  }
  for (int64_t r = 0; r < split.n; r++) {
    std::string_view row(reinterpret_cast<const char*>(split.xs->data() + r * meta.len_x), size_t(meta.len_x) * 8);
    auto [it, fresh] = seen.first.emplace(row, std::pair{split.index, r});
    if (!fresh)
      v.add(fmt::format("{} row {}: same X as {} row {}", split.x_name, r, seen.x_names[size_t(it->second.first)],
                        it->second.second));
  }
}

CheckResult check_task_dataset(const std::string& dir, int max_violations) {
  const DatasetMeta raw = read_dataset_meta(dir);
  const DatasetMeta meta = implied_meta(raw);  // what the rows are indexed and judged with
  Violations v;
  v.max = max_violations;
  check_meta_values(dir, raw, meta, v);
  const TaskOptions task = task_of_meta(meta);
  CheckResult result;
  std::vector<std::vector<int64_t>> all_x(3);  // every X row stays readable for the duplicate check
  SeenX seen;
  for (int k = 0; k < 3; k++)
    seen.x_names[size_t(k)] = fs::path(dataset_file(dir, meta.file_prefix, kSplits[k], "X")).filename().string();
  for (int k = 0; k < 3; k++) {
    const std::string split = kSplits[k];
    const std::string x_path = dataset_file(dir, meta.file_prefix, split, "X");
    const std::string y_path = dataset_file(dir, meta.file_prefix, split, "y");
    const int64_t before = v.total;
    // Headers first: nothing below reads an element unless dtype and shapes fit the task.
    const int64_t n = check_split_layout(dir, meta, split, v);
    if (n < 0) continue;
    std::vector<int64_t> xs, ys;
    try {
      const std::string x_sum = read_checked_matrix(x_path, n, meta.len_x, xs);
      const std::string y_sum = read_checked_matrix(y_path, n, meta.len_y, ys);
      for (auto& [name, hex] : raw.sha256)
        for (auto [path, got] : {std::pair{&x_path, &x_sum}, std::pair{&y_path, &y_sum}})
          if (name == fs::path(*path).filename() && *got != hex)
            v.add(fmt::format("{}: sha256 differs from meta.yaml (meta.yaml {}..., file {}...)", *path,
                              hex.substr(0, 12), got->substr(0, 12)));
    } catch (const Error& e) {
      v.add(e.what());
      continue;
    }
    all_x[k] = std::move(xs);
    const SplitRows rows{k, seen.x_names[size_t(k)], fs::path(y_path).filename().string(), &all_x[k], &ys, n};
    check_split_rows(meta, task, rows, seen, v, before, max_violations);
    if (v.total == before)
      result.summary.push_back(fmt::format("{} {}: OK {} rows, X [{}, {}] y [{}, {}] int64{}", meta.task, split, n, n,
                                           meta.len_x, n, meta.len_y, raw.sha256.empty() ? "" : ", sha256 ok"));
  }
  result.ok = v.total == 0;
  result.violations = v.list;
  if (v.total > int64_t(v.list.size())) result.violations.push_back(fmt::format("... {} violations in all", v.total));
  return result;
}

}  // namespace rmt
