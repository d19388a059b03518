#pragma once
// Reading a dataset directory written by `rmt generate` (or by the authors' generate_data.py)
// and turning it into what the model trains on: input ids and next-token targets.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rmt {

struct DatasetMeta {
  std::string task;                 // copy | reverse | retrieval | sqeq (also copy120 etc.)
  std::string file_prefix;          // the {task} part of {task}_{split}_X.npy
  std::vector<std::string> vocab;   // id -> symbol; vocab.size() is the model's n_token
  int len_x = 0, len_y = 0;         // columns of X and y
  int answer_size = 0;              // loss/accuracy positions at the end of the target
  bool stacked = true;              // input = concat(X,y)[:-1], target = concat(X,y)[1:]
  bool from_meta_yaml = false;      // false: inferred for a directory written by the authors' code
  // Added by the data engineer: the resolved task options, for decoding and checking.
  std::string kind;                 // copy | reverse | retrieval | sqeq
  int length = 0, symbols = 0, pairs = 0;
  int64_t seed = -1;                // -1 when unknown (authors' data)
  std::vector<std::pair<std::string, std::string>> sha256;  // file name -> hex, from meta.yaml
};

// Reads DIR/meta.yaml, or infers the meta from the file names when it is absent.
DatasetMeta load_dataset_meta(const std::string& dir);

// One split in the model's view. input and target are [n, seq_len] row-major.
struct LmSplit {
  int64_t n = 0;
  int seq_len = 0;
  std::vector<int32_t> input, target;
};
LmSplit load_lm_split(const std::string& dir, const DatasetMeta& meta, const std::string& split);

// 64 hex digits identifying the data a run trains and is scored on: sha256 over the names and
// sha256 sums of the six {prefix}_{split}_{X|y}.npy files, computed from the files themselves
// (streamed, so it costs one read of the data: about 0.1 s for `rmt generate copy`'s defaults).
// The same for a directory with or without meta.yaml (the authors' layout); meta.yaml itself is
// not part of it. Fails, naming the file, when one of the six is missing or unreadable.
std::string dataset_fingerprint(const std::string& dir);

}  // namespace rmt
