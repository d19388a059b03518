#pragma once
// Internal to tasks/: the parts of `rmt data check` (check.cpp) that every reader of a dataset
// shares, so that show, the training loader and the checker agree on what a valid dataset is.
#include <array>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include "lib/core/error.h"
#include "lib/files/npy.h"
#include "tasks/dataset.h"
#include "tasks/check.h"
#include "tasks/task_kind.h"

namespace rmt {

// Collected violations: the first `max` kept in full, all counted.
struct Violations {
  int max = 20;
  std::vector<std::string> list;
  int64_t total = 0;
  void add(std::string what) {
    total++;
    if (int(list.size()) < max) list.push_back(std::move(what));
  }
};

// Fails for a dataset directory that is not one: a path that does not exist, or one that
// exists but is a file (named as such, not as missing).
[[noreturn]] void fail_no_dataset_dir(const std::string& dir);

// The task a meta names, with its options resolved (a preset's own values; a base task's from meta).
TaskOptions task_of_meta(const DatasetMeta& meta);
// `raw` with every value the task implies: kind, options, vocab, len_x, len_y, input_length,
// answer_size, stacked. What every reader indexes the arrays with.
DatasetMeta implied_meta(const DatasetMeta& raw);
// One violation per value of meta.yaml that contradicts the task, naming the key, the value in
// meta.yaml and the value implied. Nothing for the authors' layout (its meta is inferred).
void check_meta_values(const std::string& dir, const DatasetMeta& raw, const DatasetMeta& implied, Violations& v);
// The .npy headers of one split against `meta` (implied values): both files present, dtype int64,
// 2-D, [N, len_x] and [N, len_y], N >= 1 and equal, the data length the shape describes (sizes
// overflow-checked), N equal to meta.yaml's count. Reads no element. Returns N, or -1 after adding
// violations.
int64_t check_split_layout(const std::string& dir, const DatasetMeta& meta, const std::string& split, Violations& v);

// One split's arrays in memory, for check_split_rows: X [n, len_x] and y [n, len_y] row-major,
// named in violations by their file names.
struct SplitRows {
  int index;  // 0 train, 1 val, 2 test
  std::string x_name, y_name;
  const std::vector<int64_t>* xs;
  const std::vector<int64_t>* ys;
  int64_t n;
};
// The X rows seen so far (in this split and the ones before), for "same X as ..." violations. The
// rows' bytes are viewed, not copied: the arrays must outlive it.
struct SeenX {
  std::array<std::string, 3> x_names;  // each split's X file name
  std::unordered_map<std::string_view, std::pair<int, int64_t>> first;  // X row -> (split, row)
};
// The rows of one split as `rmt data check` judges them (also `rmt data import`, before it writes
// anything): ids inside meta.vocab, the kind's row invariants, y against its target where the kind
// computes one (at most max_violations since v.total was counted_from), then no X seen before.
void check_split_rows(const DatasetMeta& meta, const TaskOptions& task, const SplitRows& split, SeenX& seen,
                      Violations& v, int64_t counted_from, int max_violations);

// Reads the int64 [n, cols] array of an .npy file whose header check_split_layout accepted straight
// into `out` (no second copy of the bytes), and returns the sha256 of the whole file, computed on
// the way. Fails if the file no longer has that header and size.
std::string read_checked_matrix(const std::string& path, int64_t n, int cols, std::vector<int64_t>& out);

// ---- meta.yaml and .npy helpers shared by dataset.cpp, check.cpp and text.cpp ----------------

// "int64 (<i8)" ...; "[20, 24]".
const char* dtype_name(NpyDtype d);
std::string shape_text(const std::vector<int64_t>& shape);
// The header of an .npy file from its first bytes only (the data is never read here).
NpyHeader read_header_only(const std::string& path);
// What a YAML node is, for messages: "'abc'", "a list", "a map", "nothing".
std::string yaml_what(const YAML::Node& n);
// The entries of map `node` (`where` names it in messages: "" for the top level, "options." ...):
// fails on a key not in `known`, a key given twice, or a key of `required` missing.
std::map<std::string, YAML::Node> meta_map(const YAML::Node& node, const std::string& path, const std::string& where,
                                           const std::vector<std::string>& known,
                                           const std::vector<std::string>& required);
// Typed values of meta.yaml; fail naming `path` and `key`.
int64_t meta_int(const YAML::Node& n, const std::string& path, const std::string& key, int64_t lo, int64_t hi);
std::string meta_string(const YAML::Node& n, const std::string& path, const std::string& key);
bool meta_bool(const YAML::Node& n, const std::string& path, const std::string& key);
bool is_hex64(const std::string& s);  // 64 lowercase hex digits
// meta.yaml's `sha256` map (file name -> 64 lowercase hex digits), in file order; fails naming
// `path` on a non-map, a bad sum or a name given twice.
std::vector<std::pair<std::string, std::string>> meta_sha256_map(const YAML::Node& sums, const std::string& path);

// An output directory that exists (or is created) and is writable; fails naming it otherwise.
void prepare_out_dir(const std::string& dir);
// Without --force, a dataset file already in `out_dir` (one of `targets`) is refused; called
// before anything is written and by --check, which must say no where the real command would.
void refuse_existing_outputs(const std::vector<std::string>& targets, const std::string& out_dir, bool force);
// Space left on the file system that will hold `dir` (its nearest existing ancestor).
std::optional<uint64_t> free_disk_bytes(const std::string& dir);

// Streaming sha256 (OpenSSL EVP), for files too large to hold twice.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
      EVP_MD_CTX_free(ctx_);
      fail("sha256 failed");
    }
  }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n) {
    if (n > 0 && EVP_DigestUpdate(ctx_, data, n) != 1) fail("sha256 failed");
  }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_, digest, &len) != 1) fail("sha256 failed");
    std::string out;
    for (unsigned int i = 0; i < len; i++) out += fmt::format("{:02x}", digest[i]);
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};


// Reads up to n bytes; fails on a read error.
size_t read_some(std::ifstream& in, char* data, size_t n, const std::string& path);
// sha256 of a file, read in 1 MiB chunks.
std::string file_sha256_hex(const std::string& path);

}  // namespace rmt
