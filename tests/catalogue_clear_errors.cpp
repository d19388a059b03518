// Catalogue of bad inputs (tests/catalogue.h), issue 58's "Unclear" class: messages that named a
// symptom or a wrong thing. A FIFO where a file belongs was "not found" (or waited for a writer)
// and a directory "no such file"; ARMT's tasks reported a made-up target ("y[0] = 6, expected
// 0") for a query key that no pair has; --threads and train.threads beyond int stated int's range,
// not 0..1024; an edited meta.yaml kind showed as an unknown option key; a results.csv mixing
// language-model and algorithmic rows was a field count.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tests/catalogue.h"
#include "tests/import_fixtures.h"

namespace fs = std::filesystem;

namespace {

void fifo(const std::string& path) {
  if (::mkfifo(path.c_str(), 0644) != 0) throw std::runtime_error("catalogue setup: mkfifo failed");
}

// Runs `rmt ARGS` (output discarded) as a case's setup.
void rmt_setup(const std::string& args) {
  const std::string cmd = std::string(RMT_BINARY) + " " + args + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("catalogue setup failed: rmt " + args);
}

// {dir}/d: a tiny copy dataset (train 20, val 5, test 5).
void tiny_copy(const std::string& dir) {
  rmt_setup("generate copy --length 4 --symbols 4 --train 20 --val 5 --test 5 --out " + dir + "/d");
}

// Replaces `from` by `to` in {dir}/d/meta.yaml.
void edit_meta(const std::string& dir, const std::string& from, const std::string& to) {
  const std::string path = dir + "/d/meta.yaml";
  std::string text = rmt::read_file(path);
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("catalogue setup: '" + from + "' not in meta.yaml");
  rmt::write_file_atomic(path, text.replace(at, from.size(), to));
}

// {dir}/d: TASK (ar_remember or ar_rewrite: 3 pairs of keys and values of one symbol of 6), its
// first training sample's query key (X[12], after 3 blocks key SEP value EOS) set to a symbol that
// none of its pairs has as key.
void ar_query_of_no_pair(const std::string& dir, const std::string& task) {
  rmt_setup("generate " + task + " --pairs 3 --symbols 6 --train 20 --val 5 --test 5 --out " + dir + "/d");
  const std::string path = dir + "/d/" + task + "_train_X.npy";
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> x = rmt::read_npy_int_matrix(path, rows, cols);
  int64_t absent = 0;
  while (absent == x[0] || absent == x[4] || absent == x[8]) ++absent;
  x[12] = absent;
  rmt::write_npy_int64(path, {rows, cols}, x.data());
}

// {dir}/r.csv: an algorithmic sweep's results.csv (rmt's column order) with one more line.
void results_csv_with(const std::string& dir, const std::string& header, const std::string& rows) {
  rmt::write_file_atomic(dir + "/r.csv", header + rows);
}
const std::string kAlgorithmicHeader =
    "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,segment_length,acc_teacher_forced,loss,"
    "run_id,status\n";
const std::string kLmHeader =
    "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,segment_length,acc_teacher_forced,loss,"
    "bpc,run_id,status\n";

}  // namespace

RMT_CATALOGUE({
    // ---- a FIFO or a directory where a file belongs: every reader says what the path is ----
    {"data check", "a split file is a FIFO (was \"not found\")",
     [](const std::string& dir) {
       tiny_copy(dir);
       fs::remove(dir + "/d/copy_val_X.npy");
       fifo(dir + "/d/copy_val_X.npy");
     },
     "data check {dir}/d", 1, "{dir}/d/copy_val_X.npy: is a FIFO, not a regular file"},
    {"data check", "a split file is a directory (was \"not found\")",
     [](const std::string& dir) {
       tiny_copy(dir);
       fs::remove(dir + "/d/copy_test_y.npy");
       fs::create_directory(dir + "/d/copy_test_y.npy");
     },
     "data check {dir}/d", 1, "{dir}/d/copy_test_y.npy: is a directory, expected a file"},
    {"data check", "meta.yaml is a FIFO",
     [](const std::string& dir) {
       tiny_copy(dir);
       fs::remove(dir + "/d/meta.yaml");
       fifo(dir + "/d/meta.yaml");
     },
     "data check {dir}/d", 1, "{dir}/d/meta.yaml: is a FIFO, not a regular file"},
    {"train-data", "a split file is a FIFO (the training loader)",
     [](const std::string& dir) {
       copy_data_and_config(dir);
       fs::remove(dir + "/d/copy_train_y.npy");
       fifo(dir + "/d/copy_train_y.npy");
     },
     "train --config {dir}/c.yaml --out {dir}/run", 1, "{dir}/d/copy_train_y.npy: is a FIFO, not a regular file"},
    {"cli-value", "train: --config is a FIFO (was read, waiting for a writer)",
     [](const std::string& dir) { fifo(dir + "/c.yaml"); }, "train --config {dir}/c.yaml --out {dir}/run", 1,
     "--config {dir}/c.yaml: is a FIFO, not a regular file"},
    {"data import", "--vocab is a directory (was \"no such file\")",
     [](const std::string& dir) {
       fs::create_directories(dir + "/src");
       write_sort_task(dir + "/src", sort_task());
       fs::create_directory(dir + "/v");
     },
     "data import {dir}/src --out {dir}/d --vocab {dir}/v", 1, "--vocab {dir}/v: is a directory, expected a file"},
    {"data import", "a source split is a FIFO",
     [](const std::string& dir) {
       fs::create_directories(dir + "/src");
       write_sort_task(dir + "/src", sort_task());
       fs::remove(dir + "/src/sort_val_X.npy");
       fifo(dir + "/src/sort_val_X.npy");
     },
     "data import {dir}/src --out {dir}/d", 1, "{dir}/src/sort_val_X.npy: is a FIFO, not a regular file"},
    {"generate", "--noise-text is a FIFO (was \"not a regular file\")",
     [](const std::string& dir) { fifo(dir + "/n.txt"); },
     "generate memorize --noise text --noise-text {dir}/n.txt --out {dir}/d", 1,
     "--noise-text {dir}/n.txt: is a FIFO, not a regular file"},

    // ---- ARMT's tasks: the cause (no pair has the query key), not the made-up target ---------
    {"data check", "ar_remember: the query key is no pair's (was \"y[0] = .., expected 0\")",
     [](const std::string& dir) { ar_query_of_no_pair(dir, "ar_remember"); }, "data check {dir}/d", 1,
     "ar_remember_train_X.npy row 0: the query key"},
    {"data check", "ar_remember: the query key is no pair's, named with its position",
     [](const std::string& dir) { ar_query_of_no_pair(dir, "ar_remember"); }, "data check {dir}/d", 1,
     "(X[12]) is none of the pairs' keys"},
    {"data check", "ar_rewrite: the query key is no pair's (was \"y[0] = .., expected 0\")",
     [](const std::string& dir) { ar_query_of_no_pair(dir, "ar_rewrite"); }, "data check {dir}/d", 1,
     "ar_rewrite_train_X.npy row 0: the query key"},

    // ---- ranges: the option's own, not its integer type's ------------------------------------
    {"cli-value", "eval: --threads beyond int (was \"from -2147483648 to 2147483647\")", nullptr,
     "eval --run {dir} --threads 99999999999", 1, "--threads must be from 0 to 1024 (got 99999999999)"},
    {"cli-value", "sample: --threads beyond int", nullptr, "sample {dir} --prompt a --threads 99999999999", 1,
     "--threads must be from 0 to 1024 (got 99999999999)"},
    {"--set", "train.threads beyond int (was \"at most 2147483647\")", copy_data_and_config,
     "train --config {dir}/c.yaml --set train.threads=99999999999 --out {dir}/run", 1,
     "for 'train.threads': expected a non-negative integer (at most 1024)"},

    // ---- meta.yaml: an edited kind is named as such ------------------------------------------
    {"meta.yaml", "kind: imported on a copy dataset (was \"unknown key 'options.length'\")",
     [](const std::string& dir) {
       tiny_copy(dir);
       edit_meta(dir, "kind: copy", "kind: imported");
     },
     "data check {dir}/d", 1,
     "meta.yaml: kind 'imported' does not match task copy, whose kind is 'copy': options.length is an option of "
     "kind copy"},
    {"meta.yaml", "kind that is no kind",
     [](const std::string& dir) {
       tiny_copy(dir);
       edit_meta(dir, "kind: copy", "kind: coppy");
     },
     "data check {dir}/d", 1, "meta.yaml: kind 'coppy' is not a task kind (kinds: copy, reverse, retrieval"},
    {"meta.yaml", "an imported task's kind edited to copy (was \"unknown task 'sort'\")",
     [](const std::string& dir) {
       fs::create_directories(dir + "/src");
       write_sort_task(dir + "/src", sort_task());
       rmt_setup("data import " + dir + "/src --out " + dir + "/d");
       edit_meta(dir, "kind: imported", "kind: copy");
     },
     "data check {dir}/d", 1, "meta.yaml: kind 'copy' does not match task sort, a task of your own"},

    // ---- results.csv: language-model and algorithmic rows together ---------------------------
    {"results.csv", "a language-model row among algorithmic ones, named (was a field count)",
     [](const std::string& dir) {
       results_csv_with(dir, kAlgorithmicHeader, "rmt,1,1,0,all,1,6,0.9,0.5,a1,done\nxl,1,0,8,all,1,64,0.3,0.9,1.3,l1,done\n");
     },
     "table {dir}/r.csv", 1,
     "r.csv: mixes language-model and algorithmic rows: line 3 (run_id 'l1') is a language-model run's row (with "
     "bpc) in a file of algorithmic runs"},
    {"results.csv", "an algorithmic row among language-model ones, named (was a field count)",
     [](const std::string& dir) {
       results_csv_with(dir, kLmHeader, "xl,1,0,8,all,1,64,0.3,0.9,1.3,l1,done\nrmt,1,1,0,all,1,6,0.9,0.5,a1,done\n");
     },
     "plot {dir}/r.csv --out {dir}/f.svg", 1,
     "r.csv: mixes language-model and algorithmic rows: line 3 (run_id 'a1') is an algorithmic run's row (without "
     "bpc) in a file of language-model runs"},
    {"results.csv", "a bpc column, empty on an algorithmic row: the first of the other sort named",
     [](const std::string& dir) {
       results_csv_with(dir, kLmHeader, "xl,1,0,8,all,1,64,0.3,0.9,1.3,l1,done\nrmt,1,1,0,all,1,6,0.9,0.5,,a1,done\n");
     },
     "table {dir}/r.csv", 1, "line 3 is the first algorithmic run (after a language-model run on line 2)"},
});
