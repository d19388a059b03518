// The imported kind: shapes, vocabulary and answer as the dataset states them (tasks/imported.h).
#include "tasks/imported.h"

#include <map>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "tasks/dataset.h"

namespace rmt {

int imported_len_x(const TaskOptions& t) { return t.columns_x; }
int imported_len_y(const TaskOptions& t) { return t.columns_y; }
int imported_answer_size(const TaskOptions& t) { return t.answer_positions; }
bool imported_is_stacked(const TaskOptions& t) { return t.stacked_layout; }
bool imported_unscored_targets(const TaskOptions& t) { return t.unscored; }
std::vector<std::string> imported_vocab(const TaskOptions& t) { return t.id_symbols; }

std::string imported_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t*) {
  if (t.pad_id < 0) return "";
  for (int i = 0; i < meta.len_x; i++)
    if (x[i] != t.pad_id) return "";
  return fmt::format("X is nothing but the padding id {}: an empty sample", t.pad_id);
}

namespace {

// decode_ids, with '·' for an unscored target (-1).
std::string shown_ids(const DatasetMeta& meta, const int64_t* ids, int n) {
  if (!meta.unscored_targets) return decode_ids(meta, ids, n);
  std::string out;
  for (int i = 0; i < n; i++) out += (i ? " " : "") + (ids[i] == -1 ? std::string("·") : decode_ids(meta, ids + i, 1));
  return out;
}

}  // namespace

std::string imported_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy) {
  const int unscored = cy - meta.answer_size;  // y's leading ids outside the answer (a start token ...)
  if (unscored <= 0 || unscored >= cy) return fmt::format("X: {}   y: {}", decode_ids(meta, x, cx), shown_ids(meta, y, cy));
  return fmt::format("X: {}   y: {} | {}", decode_ids(meta, x, cx), shown_ids(meta, y, unscored),
                     shown_ids(meta, y + unscored, cy - unscored));
}

void imported_finish_from_meta(TaskOptions& t, const DatasetMeta& meta) {
  t.columns_x = meta.len_x;
  t.columns_y = meta.len_y;
  t.answer_positions = meta.answer_size;
  t.stacked_layout = meta.stacked;
  t.id_symbols = meta.vocab;
  t.pad_id = meta.pad_id;
  t.unscored = meta.unscored_targets;
}

std::string imported_options_problem(const TaskOptions& t, ImportedNames names) {
  const bool flags = names == ImportedNames::flags;
  const int vocab = int(t.id_symbols.size());
  if (t.columns_x < 1 || t.columns_y < 1)  // the import reads them from arrays of at least one column
    return fmt::format("len_x is {} and len_y {}; both must be at least 1", t.columns_x, t.columns_y);
  if (t.answer_positions < 1 || t.answer_positions > t.columns_y)
    return flags ? fmt::format("--answer-size {} must be in 1..{} (y's columns): the answer is the last N ids of y",
                               t.answer_positions, t.columns_y)
                 : fmt::format("answer_size is {}, expected 1..{} (len_y): the answer is the last ids of y",
                               t.answer_positions, t.columns_y);
  if (!t.stacked_layout && t.columns_x != t.columns_y)
    return flags ? fmt::format("--aligned needs X and y of the same width (y[i] is the target at X's position i), "
                               "but X has {} columns and y {}", t.columns_x, t.columns_y)
                 : fmt::format("stacked is false (y[i] is the target at X's position i), but len_x {} differs from "
                               "len_y {}", t.columns_x, t.columns_y);
  if (t.unscored && t.stacked_layout)  // stacked: y's ids are also the model's inputs (X then y)
    return flags ? std::string("y marks positions as unscored (-1 or -100), which needs --aligned: in the stacked "
                               "layout y's ids are also the model's inputs")
                 : std::string("unscored_targets is true, but stacked is true: in the stacked layout y's ids are also "
                               "the model's inputs");
  if (t.pad_id >= vocab)
    return flags ? fmt::format("--pad-id {} is not an id of the vocabulary (0..{})", t.pad_id, vocab - 1)
                 : fmt::format("options.pad_id is {}, not an id of the vocabulary (0..{})", t.pad_id, vocab - 1);
  std::map<std::string, int> first_id;  // symbol -> its first id
  for (int id = 0; id < vocab; id++) {
    const std::string& s = t.id_symbols[size_t(id)];
    if (s.empty()) return fmt::format("the symbol of id {} is empty", id);
    if (s.find_first_of("\n\r") != std::string::npos) return fmt::format("the symbol of id {} holds a line break", id);
    auto [it, fresh] = first_id.emplace(s, id);
    if (!fresh) return fmt::format("ids {} and {} are both '{}'; each id needs its own symbol", it->second, id, s);
  }
  return "";
}

void imported_check_meta_options(const TaskOptions& t) {
  const std::string problem = imported_options_problem(t, ImportedNames::meta_yaml);
  if (!problem.empty()) fail("{}", problem);
}

}  // namespace rmt
