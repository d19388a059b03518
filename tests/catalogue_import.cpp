// Catalogue of bad inputs (tests/catalogue.h): `rmt data import` of a user's own task (a small
// sorting task, tests/import_fixtures.h, in {dir}/src), `rmt data check` of an imported
// dataset whose meta.yaml was edited, and `rmt sweep` over an imported dataset (data.dir). Each refusal names the file, the row and the rule.
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tests/catalogue.h"
#include "tests/import_fixtures.h"

namespace fs = std::filesystem;

namespace {

std::string src_file(const std::string& dir, const std::string& split, const std::string& which) {
  return fmt::format("{}/src/sort_{}_{}.npy", dir, split, which);
}

// {dir}/src: the sorting task (train 120, val 16, test 16), after `edit` changed it.
template <typename Edit>
void sort_source(const std::string& dir, Edit edit) {
  SortSplits s = sort_task();
  edit(s);
  fs::create_directories(dir + "/src");
  write_sort_task(dir + "/src", s);
}
void sort_source(const std::string& dir) {
  sort_source(dir, [](SortSplits&) {});
}

// An .npy header of any descr and shape followed by `data_bytes` zero bytes.
void write_raw_npy(const std::string& path, const std::string& descr, const std::string& shape, size_t data_bytes) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  const size_t total = 10 + dict.size() + 1;
  dict.append((total + 63) / 64 * 64 - total, ' ');
  dict += '\n';
  rmt::write_file_atomic(path, std::string("\x93NUMPY", 6) + char(1) + char(0) + char(dict.size() & 0xff) +
                                   char(dict.size() >> 8) + dict + std::string(data_bytes, '\0'));
}

// {dir}/d: the sorting task imported; then `from` replaced by `to` in its meta.yaml.
void imported_then_edited(const std::string& dir, const std::string& from, const std::string& to) {
  sort_source(dir);
  const std::string cmd = std::string(RMT_BINARY) + " data import " + dir + "/src --out " + dir + "/d >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("catalogue setup: rmt data import failed");
  const std::string path = dir + "/d/meta.yaml";
  std::string text = rmt::read_file(path);
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("catalogue setup: '" + from + "' not in meta.yaml");
  rmt::write_file_atomic(path, text.replace(at, from.size(), to));
}

// {dir}/d: the sorting task imported (and its source in {dir}/src); {dir}/s.yaml: a sweep whose
// data: block is `data` and grid `grid`, DIR standing for {dir}.
void sweep_over(const std::string& dir, std::string data, const std::string& grid) {
  imported_then_edited(dir, "task: sort", "task: sort");
  for (size_t at; (at = data.find("DIR")) != std::string::npos;) data.replace(at, 3, dir);
  std::string g = grid;
  for (size_t at; (at = g.find("DIR")) != std::string::npos;) g.replace(at, 3, dir);
  rmt::write_file_atomic(dir + "/s.yaml", "data: " + data + "\nbase: {model: {n_layer: 1}}\ngrid: {" + g + "}\n");
}

}  // namespace

RMT_CATALOGUE({
    // ---- the source directory and its files ------------------------------------------------
    {"data import", "no source directory", nullptr, "data import {dir}/nothing --out {dir}/d", 1,
     "source directory {dir}/nothing does not exist"},
    {"data import", "no NAME_split_X.npy files", [](const std::string& d) { fs::create_directories(d + "/src"); },
     "data import {dir}/src --out {dir}/d", 1,
     "{dir}/src holds no NAME_{train,val,test}_{X,y}.npy files to import"},
    {"data import", "files of two tasks",
     [](const std::string& d) {
       sort_source(d);
       fs::copy_file(src_file(d, "train", "X"), d + "/src/other_train_X.npy");
     },
     "data import {dir}/src --out {dir}/d", 1,
     "{dir}/src holds the files of several tasks ('other', 'sort'...); choose one with --name"},
    {"data import", "a missing split",
     [](const std::string& d) {
       sort_source(d);
       fs::remove(src_file(d, "val", "y"));
     },
     "data import {dir}/src --out {dir}/d", 1,
     "{dir}/src cannot be imported:\n  {dir}/src: missing val split (sort_val_y.npy not found)"},
    {"data import", "--name of no files", [](const std::string& d) { sort_source(d); },
     "data import {dir}/src --out {dir}/d --name nosuch", 1,
     "{dir}/src: missing train split (nosuch_train_X.npy not found)"},
    {"data import", "a task name that is no file prefix",
     [](const std::string& d) {
       sort_source(d);
       for (const char* split : {"train", "val", "test"})
         for (const char* which : {"X", "y"})
           fs::rename(src_file(d, split, which), fmt::format("{}/src/my sort_{}_{}.npy", d, split, which));
     },
     "data import {dir}/src --out {dir}/d", 1,
     "task name 'my sort' (the files' prefix) must be letters, digits, '_', '-' and '.' (not first)"},
    {"data import", "a 3-D array",
     [](const std::string& d) {
       sort_source(d);
       write_raw_npy(src_file(d, "train", "X"), "<i8", "(2, 3, 4)", 2 * 3 * 4 * 8);
     },
     "data import {dir}/src --out {dir}/d", 1,
     "{dir}/src/sort_train_X.npy: expected a 2-D array [rows, columns], found shape [2, 3, 4]"},
    {"data import", "float ids",
     [](const std::string& d) {
       sort_source(d);
       write_raw_npy(src_file(d, "test", "y"), "<f4", "(16, 6)", 16 * 6 * 4);
     },
     "data import {dir}/src --out {dir}/d", 1,
     "{dir}/src/sort_test_y.npy: dtype float32, expected integer token ids (int64; int32 and uint8 are accepted too)"},
    {"data import", "an integer dtype rmt does not read (int16)",
     [](const std::string& d) {
       sort_source(d);
       write_raw_npy(src_file(d, "train", "y"), "<i2", "(120, 6)", 120 * 6 * 2);
     },
     "data import {dir}/src --out {dir}/d", 1, "{dir}/src/sort_train_y.npy: unsupported npy dtype '<i2'"},
    {"data import", "a split of no rows",
     [](const std::string& d) {
       sort_source(d);
       write_raw_npy(src_file(d, "val", "X"), "<i8", "(0, 6)", 0);
       write_raw_npy(src_file(d, "val", "y"), "<i8", "(0, 6)", 0);
     },
     "data import {dir}/src --out {dir}/d", 1,
     "{dir}/src/sort_val_X.npy: shape [0, 6]: no samples (every split needs at least 1)"},
    {"data import", "X and y of a split with different row counts",
     [](const std::string& d) {
       sort_source(d);
       const SortSplits s = sort_task();
       rmt::write_npy_int64(src_file(d, "train", "y"), {119, 6}, s.y[0].data());  // the last row left out
     },
     "data import {dir}/src --out {dir}/d", 1,
     "{dir}/src/sort_train_X.npy has 120 rows but {dir}/src/sort_train_y.npy has 119"},
    {"data import", "X of another width in one split",
     [](const std::string& d) {
       sort_source(d);
       write_raw_npy(src_file(d, "val", "X"), "<i8", "(16, 5)", 16 * 5 * 8);
     },
     "data import {dir}/src --out {dir}/d", 1,
     "{dir}/src/sort_val_X.npy: 5 columns, but sort_train_X.npy has 6: X has one width in every split"},
    // ---- the rows ---------------------------------------------------------------------------
    {"data import", "an id beyond --vocab",
     [](const std::string& d) {
       sort_source(d, [](SortSplits& s) { s.x[0][2] = 9; });
       rmt::write_file_atomic(d + "/v.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n");
     },
     "data import {dir}/src --out {dir}/d --vocab {dir}/v.txt", 1,
     "sort_train_X.npy row 0: X[2] = 9 outside the vocabulary [0, 9)"},
    {"data import", "a negative id",
     [](const std::string& d) { sort_source(d, [](SortSplits& s) { s.y[1][7] = -5; }); },
     "data import {dir}/src --out {dir}/d", 1, "sort_val_y.npy row 1: y[1] = -5 outside the vocabulary [0, 10)"},
    // ---- unscored targets (y's -1 or -100) ---------------------------------------------------
    {"data import", "an unscored target in stacked data",
     [](const std::string& d) { sort_source(d, [](SortSplits& s) { s.y[1][7] = -1, s.y[2][0] = -100; }); },
     "data import {dir}/src --out {dir}/d", 1,
     "{dir}/src/sort_val_y.npy row 1: y[1] = -1 marks a position as unscored (2 such in all), which needs "
     "--aligned (X and y of one width, y[i] the target at X's position i): in the stacked layout y's ids are also "
     "the model's inputs"},
    {"data import", "ignore_index -100 in X",
     [](const std::string& d) { sort_source(d, [](SortSplits& s) { s.x[0][2] = -100; }); },
     "data import {dir}/src --out {dir}/d --aligned", 1,
     "sort_train_X.npy row 0: X[2] = -100 outside the vocabulary [0, 10)"},
    {"data import", "an aligned row with no scored position",
     [](const std::string& d) {
       sort_source(d, [](SortSplits& s) {
         std::fill(s.y[2].begin() + 18, s.y[2].begin() + 24, -100);  // test row 3
         s.y[0][0] = -1;
       });
     },
     "data import {dir}/src --out {dir}/d --aligned", 1,
     "sort_test_y.npy row 3: y is -1 (unscored) at every position: a row needs at least one scored position"},
    {"data import", "an aligned row whose answer is all unscored",
     [](const std::string& d) { sort_source(d, [](SortSplits& s) { s.y[1][4] = -1, s.y[1][5] = -100; }); },
     "data import {dir}/src --out {dir}/d --aligned --answer-size 2", 1,
     "sort_val_y.npy row 0: y is -1 (unscored) at every answer position (the last 2): a row needs at least one "
     "scored position"},
    {"data import", "the same X twice in one split",
     [](const std::string& d) {
       sort_source(d, [](SortSplits& s) { std::copy(s.x[0].begin(), s.x[0].begin() + 6, s.x[0].begin() + 6); });
     },
     "data import {dir}/src --out {dir}/d", 1, "sort_train_X.npy row 1: same X as sort_train_X.npy row 0"},
    {"data import", "an X in two splits",
     [](const std::string& d) {
       sort_source(d, [](SortSplits& s) { std::copy(s.x[0].begin() + 18, s.x[0].begin() + 24, s.x[2].begin() + 12); });
     },
     "data import {dir}/src --out {dir}/d", 1, "sort_test_X.npy row 2: same X as sort_train_X.npy row 3"},
    {"data import", "an X row of nothing but the padding id",
     [](const std::string& d) { sort_source(d, [](SortSplits& s) { std::fill(s.x[1].begin() + 24, s.x[1].begin() + 30, 0); }); },
     "data import {dir}/src --out {dir}/d --pad-id 0", 1,
     "sort_val_X.npy row 4: X is nothing but the padding id 0: an empty sample"},
    // ---- the stated values ------------------------------------------------------------------
    {"data import", "--answer-size beyond y", [](const std::string& d) { sort_source(d); },
     "data import {dir}/src --out {dir}/d --answer-size 7", 1,
     "--answer-size 7 must be in 1..6 (y's columns): the answer is the last N ids of y"},
    {"data import", "--pad-id beyond --vocab",
     [](const std::string& d) {
       sort_source(d);
       rmt::write_file_atomic(d + "/v.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
     },
     "data import {dir}/src --out {dir}/d --vocab {dir}/v.txt --pad-id 10", 1,
     "--pad-id 10 is not an id of the vocabulary (0..9)"},
    {"data import", "--aligned with y wider than X",
     [](const std::string& d) {
       sort_source(d);
       for (const char* split : {"train", "val", "test"}) {
         int64_t rows = 0, cols = 0;
         std::vector<int64_t> y = rmt::read_npy_int_matrix(src_file(d, split, "y"), rows, cols);
         std::vector<int64_t> wider;
         for (int64_t r = 0; r < rows; r++) {
           wider.push_back(9);
           wider.insert(wider.end(), y.begin() + r * cols, y.begin() + (r + 1) * cols);
         }
         rmt::write_npy_int64(src_file(d, split, "y"), {rows, cols + 1}, wider.data());
       }
     },
     "data import {dir}/src --out {dir}/d --aligned", 1,
     "--aligned needs X and y of the same width (y[i] is the target at X's position i), but X has 6 columns and y 7"},
    {"data import", "a --vocab file naming a symbol twice",
     [](const std::string& d) {
       sort_source(d);
       rmt::write_file_atomic(d + "/v.txt", "0\n1\n2\n3\n4\n5\n6\n7\n3\n9\n");
     },
     "data import {dir}/src --out {dir}/d --vocab {dir}/v.txt", 1,
     "--vocab {dir}/v.txt (line k: id k-1): ids 3 and 8 are both '3'; each id needs its own symbol"},
    {"data import", "an empty line in the --vocab file",
     [](const std::string& d) {
       sort_source(d);
       rmt::write_file_atomic(d + "/v.txt", "0\n1\n\n3\n4\n5\n6\n7\n8\n9\n");
     },
     "data import {dir}/src --out {dir}/d --vocab {dir}/v.txt", 1, "the symbol of id 2 is empty"},
    {"data import", "no --vocab file", [](const std::string& d) { sort_source(d); },
     "data import {dir}/src --out {dir}/d --vocab {dir}/v.txt", 1, "--vocab {dir}/v.txt: no such file"},
    {"data import", "ids too large to infer a vocabulary",
     [](const std::string& d) { sort_source(d, [](SortSplits& s) { s.y[2][0] = 5000000; }); },
     "data import {dir}/src --out {dir}/d", 1,
     "{dir}/src/sort_test_y.npy: id 5000000 would make a vocabulary of 5000001 ids"},
    {"data import", "a dataset already in --out",
     [](const std::string& d) {
       sort_source(d);
       fs::create_directories(d + "/d");
       rmt::write_file_atomic(d + "/d/meta.yaml", "x");
     },
     "data import {dir}/src --out {dir}/d", 1,
     "{dir}/d/meta.yaml already exists; pass --force to overwrite the dataset in {dir}/d"},
    // ---- an imported dataset's meta.yaml, edited -------------------------------------------
    {"data check", "imported: answer_size beyond len_y",
     [](const std::string& d) { imported_then_edited(d, "answer_size: 6", "answer_size: 9"); },
     "data check {dir}/d", 1, "meta.yaml: answer_size is 9, expected 1..6 (len_y)"},
    {"data check", "imported: pad_id beyond the vocabulary",
     [](const std::string& d) { imported_then_edited(d, "pad_id: -1", "pad_id: 10"); },
     "data check {dir}/d", 1, "meta.yaml: options.pad_id is 10, not an id of the vocabulary (0..9)"},
    {"data check", "imported: stacked false with the input length of stacked data",
     [](const std::string& d) { imported_then_edited(d, "stacked: true", "stacked: false"); },
     "data check {dir}/d", 1, "meta.yaml: input_length is 11, but task sort implies 6"},
    {"data check", "imported: unscored_targets added to stacked data",
     [](const std::string& d) { imported_then_edited(d, "stacked: true", "stacked: true\nunscored_targets: true"); },
     "data check {dir}/d", 1,
     "unscored_targets is true, but stacked is true: in the stacked layout y's ids are also the model's inputs"},
    {"data check", "imported: unscored_targets not a boolean",
     [](const std::string& d) { imported_then_edited(d, "stacked: true", "stacked: true\nunscored_targets: 2"); },
     "data check {dir}/d", 1, "{dir}/d/meta.yaml: 'unscored_targets' must be true or false, got '2'"},
    {"data check", "imported: two ids of one symbol",
     [](const std::string& d) { imported_then_edited(d, "1: 1,", "1: 0,"); },
     "data check {dir}/d", 1, "meta.yaml: ids 0 and 1 are both '0'; each id needs its own symbol"},
    {"data check", "imported: a vocabulary too small for the ids",
     [](const std::string& d) { imported_then_edited(d, ", 9: 9}", "}"); },
     "data check {dir}/d", 1, "sort_train_X.npy row 1: X[4] = 9 outside the vocabulary [0, 9)"},
    {"data check", "imported: a task name that is a path",
     [](const std::string& d) { imported_then_edited(d, "task: sort", "task: a/b"); },
     "data check {dir}/d", 1, "meta.yaml: 'task' must be a plain name, got 'a/b'"},
    {"data check", "imported files without meta.yaml",
     [](const std::string& d) {
       sort_source(d);
     },
     "data check {dir}/src", 1,
     "{dir}/src: cannot infer the task from file prefix 'sort' (expected copy*, reverse*, retrieval*, sqeq*); a task "
     "of your own: `rmt data import {dir}/src --out NEW_DIR` writes it in rmt's layout"},
    // ---- a sweep over an existing dataset (data: {dir: ...}) -------------------------------
    {"sweep data.dir", "dir beside an `rmt generate` option",
     [](const std::string& d) { sweep_over(d, "{dir: DIR/d, length: 5}", "segments: [1]"); },
     "sweep {dir}/s.yaml --dry-run", 1,
     "{dir}/s.yaml: data option 'length' is an `rmt generate` option; data option 'dir' names a dataset that "
     "exists (rmt data import, rmt generate), which the sweep reads as it is: give one or the other"},
    {"sweep data.dir", "a directory that does not exist",
     [](const std::string& d) { sweep_over(d, "{dir: DIR/nothing}", "segments: [1]"); },
     "sweep {dir}/s.yaml --dry-run", 1,
     "{dir}/s.yaml: data.dir {dir}/nothing is not a directory (make the dataset first"},
    {"sweep data.dir", "a directory of a user's arrays, not imported",
     [](const std::string& d) { sweep_over(d, "{dir: DIR/src}", "segments: [1]"); },
     "sweep {dir}/s.yaml --dry-run", 1,
     "{dir}/s.yaml: data.dir {dir}/src: cannot infer the task from file prefix 'sort'"},
    {"sweep data.dir", "more segments than the task's input positions",
     [](const std::string& d) { sweep_over(d, "{dir: DIR/d}", "segments: [12]"); },
     "sweep {dir}/s.yaml --dry-run", 1,
     "grid point segments=12: segments 12 is more than the 11 input positions of task sort"},
    {"sweep data.dir", "a language model's segment_length on samples",
     [](const std::string& d) { sweep_over(d, "{dir: DIR/d}", "segment_length: [4]"); },
     "sweep {dir}/s.yaml --dry-run", 1,
     "segment_length 4 applies to language models on text datasets (rmt generate text); data.dir {dir}/d is "
     "task sort, whose samples are cut into `segments`"},
    {"sweep data.dir", "a grid of dirs beside a generated task",
     [](const std::string& d) { sweep_over(d, "{task: copy}", "data.dir: [DIR/d]"); },
     "sweep {dir}/s.yaml --dry-run", 1,
     "data option 'task' is an `rmt generate` option; data option 'dir' names a dataset that exists"},
});
