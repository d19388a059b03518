#pragma once
// `rmt data import SRC --out DIR` (docs/datasets.md "Your own task"): a user's own task, given as
// NAME_{train,val,test}_{X,y}.npy with any integer dtype, is checked (files, shapes, ids, empty and
// repeated X rows, X in two splits) and written in rmt's layout as a dataset of kind imported
// (tasks/imported.h): int64 arrays, meta.yaml last, written atomically. Nothing is written unless
// every check passes.
#include <optional>
#include <string>
#include <vector>

#include "tasks/dataset.h"

namespace rmt {

struct ImportRequest {
  std::string source_dir, out_dir;
  std::string name;                // NAME; empty: the one NAME whose files source_dir holds
  std::string vocab_file;          // one symbol per line (line k: id k-1); empty: inferred
  std::optional<int> answer_size;  // the scored positions at the end of y; default: all of y
  std::optional<int> pad_id;       // a padding id: no X row may be nothing but it
  bool aligned = false;            // y[i] is the target at X's position i (input X, target y)
  bool force = false;              // overwrite a dataset in out_dir
};

struct ImportResult {
  DatasetMeta meta;                // of the dataset written
  bool vocab_inferred = false;     // ids 0..V-1 named "0".."V-1", V = the largest id + 1
  std::vector<std::string> files;  // written, meta.yaml last
  std::vector<std::string> source_dtypes;  // "sort_train_X.npy int32" for each file not int64
  int64_t unscored_positions = 0;  // y's -1 and -100 (written as -1): positions not scored
};

// Fails (rmt::Error) naming the file, row and rule; writes nothing then.
ImportResult import_dataset(const ImportRequest& request);

// PyTorch's ignore_index (CrossEntropyLoss's default; mad-lab's target_ignore_index): in y, as -1,
// a position not scored.
constexpr int64_t kIgnoreIndex = -100;
// The largest vocabulary an import infers from the ids (larger: name the symbols with --vocab).
constexpr int kMaxInferredVocab = 1 << 20;

}  // namespace rmt
