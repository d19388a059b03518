#pragma once
// Reading a dataset directory written by `rmt generate` (or by the authors' generate_data.py)
// and turning it into what the model trains on: input ids and next-token targets.
#include <array>
#include <cstdint>
#include <optional>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace rmt {

struct DatasetMeta {
  std::string task;                 // copy | reverse | retrieval | sqeq | memorize ... (also copy120 etc.;
                                    // imported: the user's NAME)
  std::string file_prefix;          // the {task} part of {task}_{split}_X.npy
  std::vector<std::string> vocab;   // id -> symbol; vocab.size() is the model's n_token
  int len_x = 0, len_y = 0;         // columns of X and y
  int input_length = 0;             // model input positions: len_x + len_y - 1 if stacked, else len_x
  int answer_size = 0;              // loss/accuracy positions at the end of the target (where y is
                                    // not -1: unscored_targets below)
  bool stacked = true;              // input = concat(X,y)[:-1], target = concat(X,y)[1:]
  bool from_meta_yaml = false;      // false: inferred for a directory written by the authors' code
  // The resolved task options, for decoding and checking.
  std::string kind;                 // copy | reverse | retrieval | sqeq | memorize | detect_memorize | reasoning | imported
  int length = 0, symbols = 0, pairs = 0;
  int key_size = 0, value_size = 0;  // ar_remember, ar_rewrite (meta.yaml options)
  int max_root = 0, max_alpha = 0;  // sqeq's range (meta.yaml options; absent = the paper's 100, 10)
  // BABILong-style tasks (tasks/babilong.h; length above is X's length): meta.yaml options.
  int facts = 0, distractors = 0, noise_words = 0;
  std::string noise, noise_text, noise_text_sha256;  // filler | text; text: the file's name and sha256
  int pad_id = -1;                  // imported: the padding id the user declared (meta.yaml options); -1 none
  int vocab_size = 0;               // mqar (meta.yaml options): ids 0..vocab_size-1
  std::string power_a, filler;      // mqar: the power law's a (decimal text), random | zero
  // MAD's tasks (meta.yaml options, tasks/mad.h); frac_noise as its decimal text.
  int noise_vocab_size = 0, k_motif_size = 0, v_motif_size = 0, tokens_to_copy = 0, kv_map_seed = 0;
  std::string frac_noise, targets, key_motifs;  // recall: scored | next; fuzzy: any | longest
  // y holds -1 at answer positions that are not scored (the kind's unscored_targets: mqar).
  bool unscored_targets = false;
  std::optional<uint64_t> seed;     // absent for the authors' data
  std::array<int64_t, 3> counts = {-1, -1, -1};  // train/val/test rows in meta.yaml; -1: not recorded
  std::vector<std::pair<std::string, std::string>> sha256;  // file name -> hex, from meta.yaml
};

// DIR/meta.yaml as written, read strictly: every key known, present once and of its type, a known
// task with its options. Without meta.yaml, the meta is inferred from the file names and the
// .npy headers (the authors' layout). The values may still contradict the task or the arrays:
// only check_task_dataset (tasks/check.h) finds that. For inspection; whatever trains or scores uses
// load_dataset_meta. A directory that may hold a text dataset is asked through its family
// (tasks/family.h samples_meta), which names what it is.
DatasetMeta read_dataset_meta(const std::string& dir);

// The meta of a dataset that passes `rmt data check` (the same check_dataset), with every value
// as the task implies it. Fails with the message `rmt data check` gives otherwise. This reads and
// checks every file (measured: about 0.3 s for `rmt generate copy`'s defaults, 2 s for copy120).
DatasetMeta load_dataset_meta(const std::string& dir);

// One split in the model's view. input and target are [n, seq_len] row-major.
struct SampleSplit {
  int64_t n = 0;
  int seq_len = 0;
  std::vector<int32_t> input, target;
  int32_t max_id = -1;  // the largest id in input and target (always < the dataset's vocab size)
};
// The model's view of one sample (x: len_x ids, y: len_y ids). Stacked tasks: S = concat(x, y),
// input = S[:-1] and target = S[1:], len_x + len_y - 1 positions each; otherwise (sqeq)
// input = x and target = y, len_x positions.
void sample_model_view(bool stacked, const int64_t* x, int len_x, const int64_t* y, int len_y,
                       int32_t* input, int32_t* target);

// Checks the split's files (dtype int64, shapes [N, len_x] / [N, len_y], N >= 1 in both, every id
// inside meta.vocab) before it builds the view; fails naming the file otherwise.
SampleSplit load_sample_split(const std::string& dir, const DatasetMeta& meta, const std::string& split);

// One split read a batch of rows at a time, for evaluation: memory for one batch, not for the
// split (a test split at 100x the trained length is hundreds of MB). The files' layout is checked
// when it opens, as load_sample_split checks it; every id is checked as its row is read. Gives
// the same model view, row for row, as load_sample_split.
class SampleSplitReader {
 public:
  SampleSplitReader(const std::string& dir, const DatasetMeta& meta, const std::string& split);
  int64_t n() const { return n_; }
  int seq_len() const { return seq_len_; }
  // Rows [start, start + count) into input and target, [count, seq_len] row-major.
  void read(int64_t start, int count, std::vector<int32_t>& input, std::vector<int32_t>& target);

 private:
  struct File {
    std::string path;
    std::ifstream in;
    uint64_t data_offset = 0;
    int cols = 0;
  };
  void read_rows(File& f, int64_t start, int count, std::vector<int64_t>& out);
  DatasetMeta meta_;
  int64_t n_ = 0;
  int seq_len_ = 0;
  File x_, y_;
  std::vector<int64_t> xs_, ys_;  // the batch's raw rows
};

// 64 hex digits identifying the data a run trains and is scored on: sha256 over the names and
// sha256 sums of the six {prefix}_{split}_{X|y}.npy files, computed from the files themselves
// (streamed, so it costs one read of the data: about 0.1 s for `rmt generate copy`'s defaults).
// The same for a directory with or without meta.yaml (the authors' layout); meta.yaml itself is
// not part of it. Fails, naming the file, when one of the six is missing or unreadable.
// dataset_fingerprint (tasks/family.h) gives the fingerprint of a dataset of any family.
std::string task_dataset_fingerprint(const std::string& dir);

// DIR/{prefix}_{split}_{X|y}.npy
std::string dataset_file(const std::string& dir, const std::string& prefix, const std::string& split,
                         const std::string& which /* X or y */);
extern const std::array<const char*, 3> kSplits;  // train, val, test

// Human-readable text of a row of ids under meta's vocabulary.
std::string decode_ids(const DatasetMeta& meta, const int64_t* ids, int n);
// Lines showing the first n samples of a split (`rmt data show`; show_dataset in tasks/family.h
// for a dataset of any family).
std::vector<std::string> show_samples(const std::string& dir, const std::string& split, int n);

}  // namespace rmt
