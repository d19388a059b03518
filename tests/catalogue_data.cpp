// Catalogue of bad inputs (tests/catalogue.h): datasets (.npy arrays and meta.yaml) as `rmt data
// check`, `rmt data show`, `rmt generate` and the training loader (`rmt train`, `rmt eval`) meet
// them. Each bad dataset starts as a tiny `generate copy` (20 / 5 / 5 samples) in {dir}/d, then one
// file is replaced or edited; raw .npy bytes are written by hand for what numpy would not produce.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tests/catalogue.h"

namespace fs = std::filesystem;

namespace {

std::string data_dir(const std::string& dir) { return dir + "/d"; }

// {dir}/d: copy L 24, 10 symbols, train 20, val 5, test 5, seed 1.
void tiny_copy(const std::string& dir, const std::string& task = "copy") {
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task(task);
  r.sizes = {20, 5, 5};
  r.seed = 1;
  r.out_dir = data_dir(dir);
  rmt::generate_dataset(r);
}

// {dir}/d: sqeq with roots in -10..9 and multipliers ±1..3 (meta.yaml records the range),
// train 40, val 10, test 10, seed 1.
void tiny_sqeq(const std::string& dir) {
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task("sqeq", {}, {}, {}, 10, 3);
  r.sizes = {40, 10, 10};
  r.seed = 1;
  r.out_dir = data_dir(dir);
  rmt::generate_dataset(r);
}

// The same, in the authors' layout (no meta.yaml).
void tiny_copy_authors(const std::string& dir, const std::string& task = "copy") {
  tiny_copy(dir, task);
  fs::remove(data_dir(dir) + "/meta.yaml");
}

std::string file_of(const std::string& dir, const std::string& split, const std::string& which,
                    const std::string& prefix = "copy") {
  return rmt::dataset_file(data_dir(dir), prefix, split, which);
}

// An .npy file with any descr and shape (as numpy writes the header), followed by `data_bytes`
// zero bytes: shapes and dtypes numpy would refuse or rmt must refuse.
void write_raw_npy(const std::string& path, const std::string& descr, const std::string& shape,
                   size_t data_bytes) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  const size_t total = 10 + dict.size() + 1;
  dict.append((total + 63) / 64 * 64 - total, ' ');
  dict += '\n';
  std::string out = std::string("\x93NUMPY", 6) + char(1) + char(0) + char(dict.size() & 0xff) +
                    char(dict.size() >> 8) + dict + std::string(data_bytes, '\0');
  rmt::write_file_atomic(path, out);
}

// Replaces `from` by `to` in meta.yaml (the case fails loudly if `from` is not there).
void edit_meta(const std::string& dir, const std::string& from, const std::string& to) {
  const std::string path = data_dir(dir) + "/meta.yaml";
  std::string text = rmt::read_file(path);
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("catalogue setup: '" + from + "' not in meta.yaml");
  text.replace(at, from.size(), to);
  rmt::write_file_atomic(path, text);
}

// An int64 array of a split, edited by `change`, written back (numpy-identical bytes).
template <typename Change>
void edit_ids(const std::string& path, Change change) {
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> ids = rmt::read_npy_int_matrix(path, rows, cols);
  change(ids, rows, cols);
  rmt::write_npy_int64(path, {rows, cols}, ids.data());
}

// A config for a tiny run on {dir}/d.
void tiny_config(const std::string& dir) {
  std::ofstream(dir + "/c.yaml") << "data: " << data_dir(dir) << "\n"
                                 << "segments: 1\n"
                                 << "model: {kind: baseline, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, "
                                    "d_inner: 16}\n"
                                 << "train: {batch_size: 4, max_steps: 2, eval_every: 2, log_every: 1, "
                                    "threads: 1}\n";
}

void copy_for_training(const std::string& dir) {
  tiny_copy(dir);
  tiny_config(dir);
}

// A finished tiny run in {dir}/run on {dir}/d (for `rmt eval` of a dataset changed afterwards).
void trained_run(const std::string& dir) {
  copy_for_training(dir);
  const std::string cmd = std::string(RMT_BINARY) + " train --config " + dir + "/c.yaml --out " + dir +
                          "/run >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("catalogue setup: tiny training run failed");
}

const std::string kF32 = "dtype is float32 (<f4), expected int64 (<i8)";

}  // namespace

RMT_CATALOGUE({
    // ---- the .npy arrays of a dataset ----------------------------------------------------------
    {"npy-dataset", "X of float32",
     [](const std::string& d) {
       tiny_copy(d);
       write_raw_npy(file_of(d, "train", "X"), "<f4", "(20, 24)", 20 * 24 * 4);
     },
     "data check {dir}/d", 1, "copy_train_X.npy: " + kF32},
    {"npy-dataset", "X of float32, authors' layout",
     [](const std::string& d) {
       tiny_copy_authors(d);
       write_raw_npy(file_of(d, "val", "X"), "<f4", "(5, 24)", 5 * 24 * 4);
     },
     "data check {dir}/d", 1, "copy_val_X.npy: " + kF32},
    {"npy-dataset", "X of int32",
     [](const std::string& d) {
       tiny_copy_authors(d);
       write_raw_npy(file_of(d, "test", "X"), "<i4", "(5, 24)", 5 * 24 * 4);
     },
     "data check {dir}/d", 1, "copy_test_X.npy: dtype is int32 (<i4), expected int64 (<i8)"},
    {"npy-dataset", "y of shape [N, 0]",
     [](const std::string& d) {
       tiny_copy_authors(d);
       write_raw_npy(file_of(d, "train", "y"), "<i8", "(20, 0)", 0);
     },
     "data check {dir}/d", 1, "copy_train_y.npy: shape is [20, 0], but task copy implies [N, 49]"},
    {"npy-dataset", "y shape whose element count overflows",
     [](const std::string& d) {
       tiny_copy(d);
       write_raw_npy(file_of(d, "train", "y"), "<i8", "(4294967296, 4294967296)", 0);
     },
     "data check {dir}/d", 1, "copy_train_y.npy: npy shape [4294967296, 4294967296] declares more elements than any file can hold"},
    {"npy-dataset", "X shape whose element count overflows, authors' layout (the task's length is read from it)",
     [](const std::string& d) {
       tiny_copy_authors(d);
       write_raw_npy(file_of(d, "train", "X"), "<i8", "(4294967296, 4294967296)", 0);
     },
     "data check {dir}/d", 1, "copy_train_X.npy: npy shape [4294967296, 4294967296] declares more elements than any file can hold"},
    {"npy-dataset", "X of one dimension",
     [](const std::string& d) {
       tiny_copy(d);
       write_raw_npy(file_of(d, "val", "X"), "<i8", "(120,)", 120 * 8);
     },
     "data check {dir}/d", 1, "copy_val_X.npy: shape is [120], but task copy implies [N, 24]"},
    {"npy-dataset", "X and y of different row counts",
     [](const std::string& d) {
       tiny_copy_authors(d);
       edit_ids(file_of(d, "train", "y"), [](std::vector<int64_t>& ids, int64_t& rows, int64_t& cols) {
         rows--;
         ids.resize(size_t(rows * cols));
       });
     },
     "data check {dir}/d", 1, "copy_train_X.npy has 20 rows but"},
    {"npy-dataset", "data shorter than the shape says",
     [](const std::string& d) {
       tiny_copy_authors(d);
       write_raw_npy(file_of(d, "train", "X"), "<i8", "(20, 24)", 19 * 24 * 8);
     },
     "data check {dir}/d", 1, "copy_train_X.npy: shape [20, 24] needs 3840 bytes of data, the file holds 3648"},
    {"npy-dataset", "a split with no rows",
     [](const std::string& d) {
       tiny_copy_authors(d);
       write_raw_npy(file_of(d, "test", "X"), "<i8", "(0, 24)", 0);
       write_raw_npy(file_of(d, "test", "y"), "<i8", "(0, 49)", 0);
     },
     "data check {dir}/d", 1, "copy_test_X.npy: shape is [0, 24]: no samples"},
    {"npy-dataset", "a split's y file missing",
     [](const std::string& d) {
       tiny_copy(d);
       fs::remove(file_of(d, "val", "y"));
     },
     "data check {dir}/d", 1, "missing val split (copy_val_y.npy not found)"},
    {"npy-dataset", "not an .npy file",
     [](const std::string& d) {
       tiny_copy_authors(d);
       rmt::write_file_atomic(file_of(d, "val", "y"), "just some text, not numpy");
     },
     "data check {dir}/d", 1, "copy_val_y.npy: not a .npy file"},
    {"npy-dataset", "retrieval X with an even number of columns, authors' layout",
     [](const std::string& d) {
       tiny_copy_authors(d, "retrieval");
       write_raw_npy(file_of(d, "train", "X", "retrieval"), "<i8", "(20, 8)", 20 * 8 * 8);
     },
     "data check {dir}/d", 1, "8 columns, but retrieval X has 2 * pairs + 1 columns"},

    // ---- meta.yaml ---------------------------------------------------------------------------
    {"meta.yaml", "answer_size contradicts the task",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "answer_size: 48", "answer_size: 5");
     },
     "data check {dir}/d", 1, "meta.yaml: answer_size is 5, but task copy implies 48"},
    {"meta.yaml", "stacked contradicts the task",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "stacked: true", "stacked: false");
     },
     "data check {dir}/d", 1, "meta.yaml: stacked is false, but task copy implies true"},
    {"meta.yaml", "len_y contradicts the task",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "len_y: 49", "len_y: 50");
     },
     "data check {dir}/d", 1, "meta.yaml: len_y is 50, but task copy implies 49"},
    {"meta.yaml", "input_length contradicts the task",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "input_length: 72", "input_length: 71");
     },
     "data check {dir}/d", 1, "meta.yaml: input_length is 71, but task copy implies 72"},
    {"meta.yaml", "a count contradicts the arrays",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "train: 20", "train: 21");
     },
     "data check {dir}/d", 1, "meta.yaml: counts.train is 21, but copy_train_X.npy has 20 rows"},
    {"meta.yaml", "a sha256 contradicts its file",
     [](const std::string& d) {
       tiny_copy(d);
       edit_ids(file_of(d, "val", "X"), [](std::vector<int64_t>& ids, int64_t&, int64_t&) { ids[0] = ids[0] == 2 ? 3 : 2; });
     },
     "data check {dir}/d", 1, "copy_val_X.npy: sha256 differs from meta.yaml"},
    {"meta.yaml", "a file without sha256 entry",
     [](const std::string& d) {
       tiny_copy(d);
       const std::string path = data_dir(d) + "/meta.yaml";
       std::string text = rmt::read_file(path);
       const size_t at = text.find("  copy_test_y.npy: ");
       text.erase(at, text.find('\n', at) + 1 - at);
       rmt::write_file_atomic(path, text);
     },
     "data check {dir}/d", 1, "meta.yaml: sha256 has no entry for copy_test_y.npy"},
    {"meta.yaml", "vocabulary disagrees with the task",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "1: <go>", "1: <start>");
     },
     "data check {dir}/d", 1, "meta.yaml: vocab.1 is '<start>', but task copy implies '<go>'"},
    {"meta.yaml", "kind contradicts the task",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "kind: copy", "kind: reverse");
     },
     "data check {dir}/d", 1, "meta.yaml: kind is 'reverse', but task copy implies 'copy'"},
    {"meta.yaml", "a preset's options contradict it",
     [](const std::string& d) {
       tiny_copy(d, "copy120");
       edit_meta(d, "length: 120", "length: 100");
     },
     "data check {dir}/d", 1, "meta.yaml: options.length is 100, but task copy120 implies 120"},
    {"meta.yaml", "unknown task",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "task: copy", "task: copy7");
     },
     "data check {dir}/d", 1, "meta.yaml: unknown task 'copy7' (known: copy, reverse"},
    {"meta.yaml", "unknown key",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "stacked: true", "stacked: true\nshuffled: true");
     },
     "data check {dir}/d", 1, "meta.yaml: unknown key 'shuffled' (known: task, kind"},
    {"meta.yaml", "unknown option of the task",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "symbols: 10}", "symbols: 10, pairs: 4}");
     },
     "data check {dir}/d", 1, "meta.yaml: unknown key 'options.pairs' (known: length, symbols)"},
    {"meta.yaml", "missing key",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "answer_size: 48\n", "");
     },
     "data check {dir}/d", 1, "meta.yaml: missing key 'answer_size'"},
    {"meta.yaml", "key given twice",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "len_x: 24", "len_x: 24\nlen_x: 24");
     },
     "data check {dir}/d", 1, "meta.yaml: key 'len_x' appears twice"},
    {"meta.yaml", "integer key of another type",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "len_x: 24", "len_x: 24.5");
     },
     "data check {dir}/d", 1, "meta.yaml: 'len_x' must be an integer, got '24.5'"},
    {"meta.yaml", "boolean key of another type",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "stacked: true", "stacked: [true]");
     },
     "data check {dir}/d", 1, "meta.yaml: 'stacked' must be true or false, got a list"},
    {"meta.yaml", "negative seed",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "seed: 1", "seed: -1");
     },
     "data check {dir}/d", 1, "meta.yaml: 'seed' must be an integer in 0..2^64-1, got '-1'"},
    {"meta.yaml", "a base task's option out of range",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "symbols: 10", "symbols: 40");
     },
     "data check {dir}/d", 1, "meta.yaml: 'options.symbols' is 40, expected 1..36"},
    {"meta.yaml", "file_prefix that leaves the directory",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "file_prefix: copy", "file_prefix: ../copy");
     },
     "data check {dir}/d", 1, "meta.yaml: 'file_prefix' must be a plain file name part, got '../copy'"},
    {"meta.yaml", "not YAML",
     [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "task: copy", "task: [copy");
     },
     "data check {dir}/d", 1, "meta.yaml: not valid YAML"},

    // ---- rmt data check: the rows and the directory -------------------------------------------
    {"data check", "no such directory", nullptr, "data check {dir}/nothing", 1,
     "/nothing does not exist"},
    {"data check", "a directory without dataset files", nullptr, "data check {dir}", 1,
     "no meta.yaml and no {task}_{split}_X.npy files"},
    {"data check", "file prefix of no task",
     [](const std::string& d) {
       tiny_copy_authors(d);
       for (const char* split : {"train", "val", "test"})
         for (const char* which : {"X", "y"}) fs::rename(file_of(d, split, which), file_of(d, split, which, "sort"));
     },
     "data check {dir}/d", 1, "cannot infer the task from file prefix 'sort'"},
    {"data check", "id outside the vocabulary",
     [](const std::string& d) {
       tiny_copy_authors(d);
       edit_ids(file_of(d, "train", "X"), [](std::vector<int64_t>& ids, int64_t&, int64_t&) { ids[3] = 99; });
     },
     "data check {dir}/d", 1, "copy_train_X.npy row 0: X[3] = 99 outside the vocabulary [0, 12)"},
    {"data check", "answer id outside the vocabulary: y's file named, not X's",
     [](const std::string& d) {
       tiny_copy_authors(d);
       edit_ids(file_of(d, "train", "y"), [](std::vector<int64_t>& ids, int64_t&, int64_t&) { ids[2] = 99; });
     },
     "data check {dir}/d", 1, "copy_train_y.npy row 0: y[2] = 99 outside the vocabulary [0, 12)"},
    {"data check", "y that is not the task's answer",
     [](const std::string& d) {
       tiny_copy_authors(d);
       edit_ids(file_of(d, "val", "y"), [](std::vector<int64_t>& ids, int64_t&, int64_t& cols) {
         ids[cols + 1] = ids[cols + 1] == 2 ? 3 : 2;  // row 1, first answer symbol
       });
     },
     "data check {dir}/d", 1, "copy_val_X.npy row 1: y[1] = "},
    {"data check", "the same X in train and test",
     [](const std::string& d) {
       tiny_copy_authors(d);
       int64_t rows = 0, cols = 0;
       const std::vector<int64_t> train = rmt::read_npy_int_matrix(file_of(d, "train", "X"), rows, cols);
       edit_ids(file_of(d, "test", "X"), [&](std::vector<int64_t>& ids, int64_t&, int64_t& c) {
         std::copy(train.begin() + 2 * c, train.begin() + 3 * c, ids.begin());
       });
     },
     "data check {dir}/d", 1, "copy_test_X.npy row 0: same X as copy_train_X.npy row 2"},

    // ---- rmt data show -------------------------------------------------------------------------
    {"data show", "X of float32",
     [](const std::string& d) {
       tiny_copy(d);
       write_raw_npy(file_of(d, "train", "X"), "<f4", "(20, 24)", 20 * 24 * 4);
     },
     "data show {dir}/d", 1, "copy_train_X.npy: " + kF32},
    {"data show", "y of shape [N, 0]",
     [](const std::string& d) {
       tiny_copy_authors(d);
       write_raw_npy(file_of(d, "val", "y"), "<i8", "(5, 0)", 0);
     },
     "data show {dir}/d --split val", 1, "copy_val_y.npy: shape is [5, 0], but task copy implies [N, 49]"},
    {"data show", "shape whose element count overflows",
     [](const std::string& d) {
       tiny_copy(d);
       write_raw_npy(file_of(d, "test", "X"), "<i8", "(1099511627776, 1099511627776)", 0);
     },
     "data show {dir}/d --split test", 1, "copy_test_X.npy: npy shape [1099511627776, 1099511627776] declares more elements"},
    {"data show", "meta.yaml contradicting the task", [](const std::string& d) {
       tiny_copy(d);
       edit_meta(d, "answer_size: 48", "answer_size: 47");
     },
     "data show {dir}/d", 1, "meta.yaml: answer_size is 47, but task copy implies 48"},
    {"data show", "unknown split", [](const std::string& d) { tiny_copy(d); }, "data show {dir}/d --split dev", 1, "unknown split 'dev' (train, val, test)"},

    // ---- rmt generate ------------------------------------------------------------------------
    {"generate", "ar_remember: more pairs than distinct keys", nullptr,
     "generate ar_remember --pairs 300 --key-size 2 --out {dir}/d", 1,
     "--pairs 300 is too many for distinct keys: 16 symbols in keys of 2 make 256; a longer --key-size"},
    {"generate", "ar_rewrite: a key of 9 symbols", nullptr, "generate ar_rewrite --key-size 9 --out {dir}/d", 1,
     "--key-size must be from 1 to 8 (got 9)"},
    {"generate", "--value-size on retrieval", nullptr, "generate retrieval --value-size 2 --out {dir}/d", 1,
     "--value-size is not an option of task retrieval"},
    {"generate", "an empty train split", nullptr, "generate copy --train 0 --out {dir}/d", 1,
     "--train must be at least 1 (got 0)"},
    {"generate", "an empty validation split", nullptr, "generate copy --train 10 --val 0 --test 2 --out {dir}/d", 1,
     "--val must be at least 1 (got 0)"},
    {"generate", "more than the machine's memory", nullptr,
     "generate copy --length 100000 --train 1000000000 --out {dir}/d", 1, "of memory to generate; this machine has"},
    {"generate", "counts whose sum overflows", nullptr,
     "generate copy --train 9223372036854775807 --val 9223372036854775807 --test 9223372036854775807 --out {dir}/d",
     1, "of memory to generate"},
    {"generate", "more samples than the task has", nullptr,
     "generate retrieval --pairs 1 --train 200 --val 50 --test 20 --out {dir}/d", 1,
     "270 samples requested (train 200 + val 50 + test 20) but retrieval has only 260 distinct samples"},
    {"generate", "negative seed", nullptr, "generate copy --seed -1 --train 5 --val 1 --test 1 --out {dir}/d", 1,
     "--seed must be an integer in 0..18446744073709551615 (got '-1')"},

    // ---- rmt generate sqeq --max-root R --max-alpha A -------------------------------------------
    {"generate", "sqeq --max-root 0", nullptr, "generate sqeq --max-root 0 --out {dir}/d", 1,
     "--max-root must be from 2 to 208 (got 0)"},
    {"generate", "sqeq negative --max-root", nullptr, "generate sqeq --max-root -10 --out {dir}/d", 1,
     "--max-root must be from 2 to 208 (got -10)"},
    {"generate", "sqeq --max-root 1 (below the table's 2..208: only the root 0)", nullptr,
     "generate sqeq --max-root 1 --out {dir}/d", 1, "--max-root must be from 2 to 208 (got 1)"},
    {"generate", "sqeq --max-root 209 (above the table's 2..208: a 30-id block)", nullptr,
     "generate sqeq --max-root 209 --out {dir}/d", 1, "--max-root must be from 2 to 208 (got 209)"},
    {"generate", "sqeq --max-alpha 0", nullptr, "generate sqeq --max-alpha 0 --out {dir}/d", 1,
     "--max-alpha must be from 1 to 249999 (got 0)"},
    {"generate", "sqeq --max-alpha too large for the shown equation", nullptr,
     "generate sqeq --max-alpha 10000 --out {dir}/d", 1,
     "--max-alpha 10000 is too large for --max-root 100: the shown equation -10000*x^2-2000000*x-100000000=0 needs "
     "32 ids, a block holds 30; at most 9999"},
    {"generate", "sqeq --max-alpha too large for --max-root 208", nullptr,
     "generate sqeq --max-root 208 --max-alpha 3000 --out {dir}/d", 1,
     "--max-alpha 3000 is too large for --max-root 208: the shown equation -3000*x^2-1248000*x-129792000=0 needs 31 "
     "ids, a block holds 30; at most 2403"},
    {"generate", "sqeq range too small for the requested split", nullptr,
     "generate sqeq --max-root 10 --max-alpha 3 --train 20000 --val 1000 --test 2000 --out {dir}/d", 1,
     "--train 20000 is more than sqeq --max-root 10 --max-alpha 3 has: only 9330 distinct samples"},
    {"generate", "--max-root for a task without roots", nullptr, "generate copy --max-root 10 --out {dir}/d", 1,
     "--max-root is not an option of task copy"},
    {"meta.yaml", "sqeq options.max_root too large",
     [](const std::string& d) {
       tiny_sqeq(d);
       edit_meta(d, "max_root: 10", "max_root: 300");
     },
     "data check {dir}/d", 1, "meta.yaml: options.max_root 300 is too large: a sample must fit blocks of 30 ids"},
    {"meta.yaml", "sqeq options.max_alpha not a number",
     [](const std::string& d) {
       tiny_sqeq(d);
       edit_meta(d, "max_alpha: 3", "max_alpha: three");
     },
     "data check {dir}/d", 1, "meta.yaml: 'options.max_alpha' must be an integer, got 'three'"},
    {"meta.yaml", "sqeq options.max_alpha 0",
     [](const std::string& d) {
       tiny_sqeq(d);
       edit_meta(d, "max_alpha: 3", "max_alpha: 0");
     },
     "data show {dir}/d", 1, "meta.yaml: options.max_alpha must be at least 1 (got 0)"},
    {"meta.yaml", "sqeq unknown option",
     [](const std::string& d) {
       tiny_sqeq(d);
       edit_meta(d, "max_root: 10", "max_roots: 10");
     },
     "data check {dir}/d", 1, "meta.yaml: unknown key 'options.max_roots' (known: max_root, max_alpha)"},
    {"data check", "sqeq roots outside the range meta.yaml records",
     [](const std::string& d) {
       tiny_sqeq(d);
       edit_meta(d, "max_root: 10", "max_root: 4");
     },
     "data check {dir}/d", 1, "(meta.yaml options.max_root 4)"},
    {"data check", "sqeq multiplier outside the range meta.yaml records",
     [](const std::string& d) {
       tiny_sqeq(d);
       edit_meta(d, "max_alpha: 3", "max_alpha: 1");
     },
     "data check {dir}/d", 1, "is not in ±1..1 (meta.yaml options.max_alpha)"},

    // ---- the training loader refuses what data check rejects -------------------------------
    {"train-data", "meta.yaml answer_size contradicting the task",
     [](const std::string& d) {
       copy_for_training(d);
       edit_meta(d, "answer_size: 48", "answer_size: 5");
     },
     "train --config {dir}/c.yaml --out {dir}/run", 1, "meta.yaml: answer_size is 5, but task copy implies 48"},
    {"train-data", "meta.yaml stacked contradicting the task",
     [](const std::string& d) {
       copy_for_training(d);
       edit_meta(d, "stacked: true", "stacked: false");
     },
     "train --config {dir}/c.yaml --out {dir}/run", 1, "meta.yaml: stacked is false, but task copy implies true"},
    {"train-data", "meta.yaml count contradicting the arrays",
     [](const std::string& d) {
       copy_for_training(d);
       edit_meta(d, "val: 5", "val: 6");
     },
     "train --config {dir}/c.yaml --out {dir}/run", 1, "meta.yaml: counts.val is 6, but copy_val_X.npy has 5 rows"},
    {"train-data", "a file changed after generation (sha256)",
     [](const std::string& d) {
       copy_for_training(d);
       edit_ids(file_of(d, "test", "y"), [](std::vector<int64_t>& ids, int64_t&, int64_t&) { ids[1] = ids[1] == 2 ? 3 : 2; });
     },
     "train --config {dir}/c.yaml --out {dir}/run", 1, "copy_test_y.npy: sha256 differs from meta.yaml"},
    {"train-data", "X of float32",
     [](const std::string& d) {
       copy_for_training(d);
       write_raw_npy(file_of(d, "train", "X"), "<f4", "(20, 24)", 20 * 24 * 4);
     },
     "train --config {dir}/c.yaml --out {dir}/run", 1, "copy_train_X.npy: " + kF32},
    {"train-data", "y of shape [N, 0], authors' layout",
     [](const std::string& d) {
       copy_for_training(d);
       fs::remove(data_dir(d) + "/meta.yaml");
       write_raw_npy(file_of(d, "train", "y"), "<i8", "(20, 0)", 0);
     },
     "train --config {dir}/c.yaml --out {dir}/run", 1, "copy_train_y.npy: shape is [20, 0], but task copy implies [N, 49]"},
    {"train-data", "an id outside the vocabulary, authors' layout",
     [](const std::string& d) {
       copy_for_training(d);
       fs::remove(data_dir(d) + "/meta.yaml");
       edit_ids(file_of(d, "val", "y"), [](std::vector<int64_t>& ids, int64_t&, int64_t&) { ids[0] = 12; });
     },
     "train --config {dir}/c.yaml --out {dir}/run", 1, "copy_val_y.npy row 0: y[0] = 12 outside the vocabulary [0, 12)"},
    {"train-data", "eval after the dataset's meta.yaml was edited",
     [](const std::string& d) {
       trained_run(d);
       edit_meta(d, "answer_size: 48", "answer_size: 24");
     },
     "eval --run {dir}/run", 1, "meta.yaml: answer_size is 24, but task copy implies 48"},
});
