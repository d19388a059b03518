// Catalogue of bad inputs (tests/catalogue.h) for byte-level text datasets: `rmt generate text`
// (the input file, --split, --bytes, options of other tasks) and `rmt data check` / `data show`
// on a text dataset whose files or meta.yaml were damaged. Each damaged dataset starts as
// `generate text` of a 400-byte file in {dir}/d (train 360, val 20, test 20 bytes).
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tasks/text.h"
#include "tests/catalogue.h"

namespace fs = std::filesystem;

namespace {

const std::string kText =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, it "
    "was the season of Darkness, it was the spring of hope, it was the winter of despair, we had everything "
    "before us, we had nothing before us, we were all going direct to Heaven, we were all going direct the "
    "other way.\n";

// {dir}/in.txt: 400 bytes of text.
void text_file(const std::string& dir) { rmt::write_file_atomic(dir + "/in.txt", kText.substr(0, 400)); }

// {dir}/d: the text dataset of {dir}/in.txt, split 90,5,5.
void text_dataset(const std::string& dir) {
  text_file(dir);
  rmt::TextGenerateRequest r;
  r.input = dir + "/in.txt";
  r.out_dir = dir + "/d";
  rmt::generate_text_dataset(r);
}

// {dir}/d: a tiny copy dataset (an algorithmic one).
void copy_dataset(const std::string& dir) {
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task("copy");
  r.sizes = {5, 2, 2};
  r.out_dir = dir + "/d";
  rmt::generate_dataset(r);
}

std::string split_file(const std::string& dir, const std::string& split) {
  return rmt::text_split_file(dir + "/d", split);
}

// Replaces `from` by `to` in {dir}/d/meta.yaml (the case fails loudly if `from` is not there).
void edit_meta(const std::string& dir, const std::string& from, const std::string& to) {
  const std::string path = dir + "/d/meta.yaml";
  std::string text = rmt::read_file(path);
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("catalogue setup: '" + from + "' not in meta.yaml");
  text.replace(at, from.size(), to);
  rmt::write_file_atomic(path, text);
}

// Applies `change` to the bytes of a split file and writes it back.
template <typename Change>
void edit_split(const std::string& dir, const std::string& split, Change change) {
  std::string bytes = rmt::read_file(split_file(dir, split));
  change(bytes);
  rmt::write_file_atomic(split_file(dir, split), bytes);
}

const std::string kGen = "generate text --input {dir}/in.txt --out {dir}/d";

}  // namespace

RMT_CATALOGUE({
    // ---- rmt generate text -------------------------------------------------------------------
    {"generate text", "no --input", nullptr, "generate text --out {dir}/d", 1, "task text needs --input FILE"},
    {"generate text", "input file missing", nullptr, kGen, 1, "in.txt: no such file"},
    {"generate text", "input file empty", [](const std::string& d) { rmt::write_file_atomic(d + "/in.txt", ""); },
     kGen, 1, "in.txt is empty"},
    {"generate text", "input is a directory", nullptr, "generate text --input {dir} --out {dir}/d", 1,
     "is a directory; give the text file itself"},
    {"generate text", "input is a pipe",
     [](const std::string& d) {
       if (::mkfifo((d + "/in.txt").c_str(), 0600) != 0) throw std::runtime_error("catalogue setup: mkfifo failed");
     },
     kGen, 1, "is not a regular file"},
    {"generate text", "input too small for the split",
     [](const std::string& d) { rmt::write_file_atomic(d + "/in.txt", "0123456789abcdefghijklmnopqrstuvwxyz"); }, kGen,
     1, "in.txt has 36 bytes: --split 90,5,5 gives the val split 1 byte; every split needs at least 2"},
    {"generate text", "--split of two numbers", text_file, kGen + " --split 90,10", 1,
     "--split '90,10' has 2 parts; expected three whole percentages train,val,test that sum to 100"},
    {"generate text", "--split of four numbers", text_file, kGen + " --split 80,10,5,5", 1, "has 4 parts"},
    {"generate text", "--split not summing to 100", text_file, kGen + " --split 80,10,5", 1,
     "--split '80,10,5' sums to 95"},
    {"generate text", "--split with a zero share", text_file, kGen + " --split 95,5,0", 1,
     "the test share is 0; every split needs at least 1%"},
    {"generate text", "--split with a fraction", text_file, kGen + " --split 90,4.5,5.5", 1,
     "the val share '4.5' is not a whole number 0..100"},
    {"generate text", "--split with a negative share", text_file, kGen + " --split 110,-5,-5", 1,
     "the train share '110' is not a whole number 0..100"},
    {"generate text", "--split of words", text_file, kGen + " --split train,val,test", 1,
     "the train share 'train' is not a whole number"},
    {"generate text", "--bytes beyond the file", text_file, kGen + " --bytes 401", 1,
     "in.txt holds (400 bytes)"},
    {"generate text", "--bytes 0", text_file, kGen + " --bytes 0", 1, "--bytes must be at least 1"},
    {"generate text", "--bytes too few for the split", text_file, kGen + " --bytes 30", 1,
     "in.txt (--bytes): --split 90,5,5 gives the val split 1 byte"},
    {"generate text", "--seed given", text_file, kGen + " --seed 3", 1, "--seed is not an option of task text"},
    {"generate text", "--train given", text_file, kGen + " --train 100", 1, "--train is not an option of task text"},
    {"generate text", "--input for an algorithmic task", text_file, "generate copy --input {dir}/in.txt --out {dir}/d",
     1, "--input is an option of task text only (got task copy)"},
    {"generate text", "--split for an algorithmic task", nullptr, "generate sqeq --split 90,5,5 --out {dir}/d", 1,
     "--split is an option of task text only"},
    {"generate text", "dataset already there", text_dataset, kGen, 1, "already exists; pass --force"},
    {"generate text", "--out is a file", text_file, "generate text --input {dir}/in.txt --out {dir}/in.txt", 1,
     "--out {dir}/in.txt: exists and is not a directory"},

    // ---- rmt data check / data show on a text dataset ------------------------------------------
    {"text dataset", "a flipped byte in a split", [](const std::string& d) {
       text_dataset(d);
       edit_split(d, "val", [](std::string& b) { b[b.size() - 1] ^= 0x01; });
     },
     "data check {dir}/d", 1, "text_val.npy: sha256 differs from meta.yaml"},
    {"text dataset", "a truncated split", [](const std::string& d) {
       text_dataset(d);
       edit_split(d, "train", [](std::string& b) { b.resize(b.size() - 60); });
     },
     "data check {dir}/d", 1, "text_train.npy: shape [360] needs 360 bytes of data, the file holds 300 (truncated"},
    {"text dataset", "a split with bytes appended", [](const std::string& d) {
       text_dataset(d);
       edit_split(d, "test", [](std::string& b) { b += "more"; });
     },
     "data check {dir}/d", 1, "text_test.npy: shape [20] needs 20 bytes of data, the file holds 24 (bytes after the data)"},
    {"text dataset", "a split file missing", [](const std::string& d) {
       text_dataset(d);
       fs::remove(split_file(d, "test"));
     },
     "data check {dir}/d", 1, "text_test.npy: missing split file"},
    {"text dataset", "a split that is not an .npy file", [](const std::string& d) {
       text_dataset(d);
       rmt::write_file_atomic(split_file(d, "val"), "just text, no header");
     },
     "data check {dir}/d", 1, "text_val.npy"},
    {"text dataset", "a split of int64", [](const std::string& d) {
       text_dataset(d);
       std::vector<int64_t> ids(20, 65);
       rmt::write_npy_int64(split_file(d, "val"), {20}, ids.data());
     },
     "data check {dir}/d", 1, "text_val.npy: dtype is int64 (<i8), expected uint8 (|u1)"},
    {"text dataset", "a split of two dimensions", [](const std::string& d) {
       text_dataset(d);
       edit_split(d, "test", [](std::string& b) {
         const size_t at = b.find("(20,)");
         b.replace(at, 5, "(4,5)");
       });
     },
     "data check {dir}/d", 1, "text_test.npy: shape is [4, 5], expected [bytes] (1-D)"},
    {"text dataset", "counts that the split does not give", [](const std::string& d) {
       text_dataset(d);
       edit_meta(d, "val: 20", "val: 21");
     },
     "data check {dir}/d", 1, "counts.val is 21, but split 90,5,5 of source.used 400 bytes gives 20"},
    {"text dataset", "shares not summing to 100", [](const std::string& d) {
       text_dataset(d);
       edit_meta(d, "train: 90", "train: 91");
     },
     "data check {dir}/d", 1, "split 91,5,5 sums to 101, expected 100"},
    {"text dataset", "a zero share", [](const std::string& d) {
       text_dataset(d);
       edit_meta(d, "test: 5}", "test: 0}");
     },
     "data check {dir}/d", 1, "'split.test' is 0, expected 1..100"},
    {"text dataset", "more bytes used than the source has", [](const std::string& d) {
       text_dataset(d);
       edit_meta(d, "size: 400", "size: 399");
     },
     "data check {dir}/d", 1, "source.used is 400, more than source.size 399"},
    {"text dataset", "splits that do not put back the source", [](const std::string& d) {
       text_dataset(d);
       // source.sha256 (the first sha256 in meta.yaml) of other bytes: every file still matches its own.
       std::string text = rmt::read_file(d + "/d/meta.yaml");
       text.replace(text.find("  sha256: ") + 10, 64, std::string(64, '0'));
       rmt::write_file_atomic(d + "/d/meta.yaml", text);
     },
     "data check {dir}/d", 1, "train + val + test do not put back the source"},
    {"text dataset", "a vocabulary other than 256", [](const std::string& d) {
       text_dataset(d);
       edit_meta(d, "vocab_size: 256", "vocab_size: 128");
     },
     "data check {dir}/d", 1, "'vocab_size' is 128, but a byte-level dataset has 256"},
    {"text dataset", "a newer generator version", [](const std::string& d) {
       text_dataset(d);
       edit_meta(d, "generator_version: 1", "generator_version: 9");
     },
     "data check {dir}/d", 1, "'generator_version' is 9, but this rmt reads version 1"},
    {"text dataset", "task other than text", [](const std::string& d) {
       text_dataset(d);
       edit_meta(d, "task: text", "task: copy");
     },
     "data check {dir}/d", 1, "'task' is 'copy', but a byte-level text dataset has 'text'"},
    {"text dataset", "unknown key", [](const std::string& d) {
       text_dataset(d);
       edit_meta(d, "vocab_size:", "tokenizer: bpe\nvocab_size:");
     },
     "data check {dir}/d", 1, "unknown key 'tokenizer'"},
    {"text dataset", "missing key", [](const std::string& d) {
       text_dataset(d);
       edit_meta(d, "  used: 400\n", "");
     },
     "data check {dir}/d", 1, "missing key 'source.used'"},
    {"text dataset", "a sha256 entry for no file of the dataset", [](const std::string& d) {
       text_dataset(d);
       edit_meta(d, "text_val.npy:", "text_dev.npy:");
     },
     "data check {dir}/d", 1, "sha256 names 'text_dev.npy', which is not a file of this dataset"},
    {"text dataset", "meta.yaml sha256 not hex", [](const std::string& d) {
       text_dataset(d);
       edit_meta(d, "text_test.npy: ", "text_test.npy: xyz");
     },
     "data check {dir}/d", 1, "'sha256.text_test.npy' must be 64 lowercase hex digits"},
    {"text dataset", "data show -n on a text dataset", text_dataset, "data show {dir}/d -n 3", 1,
     "-n counts the samples of an algorithmic dataset"},
    {"text dataset", "data show --bytes on an algorithmic dataset", copy_dataset, "data show {dir}/d --bytes 10", 1,
     "--bytes is for text datasets"},
    {"text dataset", "data show of an unknown split", text_dataset, "data show {dir}/d --split dev", 1,
     "unknown split 'dev' (train, val, test)"},
    {"text dataset", "data show of a truncated split", [](const std::string& d) {
       text_dataset(d);
       edit_split(d, "val", [](std::string& b) { b.resize(b.size() - 5); });
     },
     "data show {dir}/d --split val", 1, "the file holds 15 (truncated)"},
    {"text dataset", "data show --bytes negative", text_dataset, "data show {dir}/d --bytes -1", 1,
     "--bytes must be at least 0"},
});
