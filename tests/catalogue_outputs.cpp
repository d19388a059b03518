// Catalogue of bad inputs (tests/catalogue.h): outputs that would destroy something. An output
// that is one of the command's inputs, the same file given for two outputs, or a special file
// (FIFO, device node, or a link to one) that writing would replace (apps/rmt/cli_checks.h
// check_outputs_safe; lib/files/io.cpp write_file_atomic for every other writer). The cases of
// `rmt attn` are in catalogue_attn.cpp.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <doctest/doctest.h>

#include "lib/files/io.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tasks/text.h"
#include "tests/catalogue.h"

namespace fs = std::filesystem;

namespace {

// {dir}/src.txt: 2000 bytes of text.
void source_text(const std::string& dir) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "the quick brown fox\n";
  rmt::write_file_atomic(dir + "/src.txt", text);
}

// {dir}/t: a text dataset of {dir}/src.txt.
void text_dataset(const std::string& dir) {
  source_text(dir);
  rmt::TextGenerateRequest r;
  r.input = dir + "/src.txt";
  r.out_dir = dir + "/t";
  rmt::generate_text_dataset(r);
}


// {dir}/d/meta.yaml: a text of 10 distinct words (300 in all), given as the noise text.
void noise_text_in_out(const std::string& dir) {
  fs::create_directories(dir + "/d");
  std::string text;
  for (int i = 0; i < 30; ++i) text += "apple banana cherry grape lemon mango melon peach pear plum ";
  rmt::write_file_atomic(dir + "/d/meta.yaml", text);
}

void fifo(const std::string& path) { REQUIRE(::mkfifo(path.c_str(), 0644) == 0); }

// {dir}/s/results.csv of one finished run.
void results_csv(const std::string& dir) {
  fs::create_directories(dir + "/s");
  rmt::write_file_atomic(dir + "/s/results.csv",
                         "model.kind,segments,acc_teacher_forced,status\nrmt,1,0.5,done\n");
}

}  // namespace

// {dir}/d: a tiny copy dataset; {dir}/c.yaml: a 2-step run on it.
void copy_data_and_config(const std::string& dir) {
  rmt::GenerateRequest g;
  g.task = rmt::resolve_task("copy", 4, 4);
  g.sizes = {40, 8, 8};
  g.out_dir = dir + "/d";
  rmt::generate_dataset(g);
  rmt::write_file_atomic(dir + "/c.yaml", "data: " + dir + "/d\nsegments: 1\nmodel: {kind: baseline, n_layer: 1, "
                                          "n_head: 1, d_head: 4, d_model: 4, d_inner: 8}\n"
                                          "train: {batch_size: 4, max_steps: 2, eval_every: 2, threads: 1}\n");
}

// {dir}/d and {dir}/c.yaml (copy_data_and_config), trained for 2 steps into {dir}/run.
void trained_copy_run(const std::string& dir) {
  copy_data_and_config(dir);
  const std::string cmd = std::string(RMT_BINARY) + " train --config " + dir + "/c.yaml --out " + dir +
                          "/run >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("catalogue setup: rmt train failed");
}

RMT_CATALOGUE({
    // ---- generate: the dataset written over its own source ------------------------------
    {"outputs", "generate text: --input is a split file of --out", text_dataset,
     "generate text --input {dir}/t/text_train.npy --out {dir}/t --force", 1,
     "--out {dir}/t/text_train.npy: is also the input --input {dir}/t/text_train.npy; writing it would destroy the input"},
    {"outputs", "generate text: --input is meta.yaml of --out (another spelling)", text_dataset,
     "generate text --input {dir}/t/../t/meta.yaml --out {dir}/t --force", 1,
     "is also the input --input"},
    {"outputs", "generate text: meta.yaml of --out is a FIFO",
     [](const std::string& dir) {
       source_text(dir);
       fs::create_directories(dir + "/t");
       fifo(dir + "/t/meta.yaml");
     },
     "generate text --input {dir}/src.txt --out {dir}/t --force", 1,
     "/t/meta.yaml: is a FIFO; rmt writes its outputs as regular files"},
    {"outputs", "generate text: a split file of --out links to /dev/null",
     [](const std::string& dir) {
       source_text(dir);
       fs::create_directories(dir + "/t");
       fs::create_symlink("/dev/null", dir + "/t/text_val.npy");
     },
     "generate text --input {dir}/src.txt --out {dir}/t --force", 1,
     "/t/text_val.npy: is a link to a character device"},
    {"outputs", "generate copy: a dataset file of --out is a FIFO",
     [](const std::string& dir) {
       fs::create_directories(dir + "/d");
       fifo(dir + "/d/copy_train_X.npy");
     },
     "generate copy --length 4 --symbols 4 --train 10 --val 2 --test 2 --out {dir}/d --force", 1,
     "/d/copy_train_X.npy: is a FIFO; rmt writes its outputs as regular files"},
    {"outputs", "generate copy --force: meta.yaml of --out is a FIFO (it was removed before any write)",
     [](const std::string& dir) {
       fs::create_directories(dir + "/d");
       fifo(dir + "/d/meta.yaml");
     },
     "generate copy --length 4 --symbols 4 --train 10 --val 2 --test 2 --out {dir}/d --force", 1,
     "/d/meta.yaml: is a FIFO; rmt writes its outputs as regular files"},
    {"outputs", "generate memorize: --noise-text is meta.yaml of --out", noise_text_in_out,
     "generate memorize --noise text --noise-text {dir}/d/meta.yaml --noise-words 9 --train 100 --val 1 --test 1 "
     "--out {dir}/d --force", 1,
     "--out {dir}/d/meta.yaml: is also the input --noise-text {dir}/d/meta.yaml; writing it would destroy the input"},
    {"outputs", "generate memorize: --noise-text is meta.yaml of a symlinked --out",
     [](const std::string& dir) {
       noise_text_in_out(dir);
       fs::create_directory_symlink(dir + "/d", dir + "/link");
     },
     "generate memorize --noise text --noise-text {dir}/d/meta.yaml --noise-words 9 --train 100 --val 1 --test 1 "
     "--out {dir}/link --force", 1,
     "--out {dir}/link/meta.yaml: is also the input --noise-text {dir}/d/meta.yaml"},

    // ---- plot: the figure written over its input, or onto a device ----------------------
    {"outputs", "plot: --out is the results.csv it reads", results_csv,
     "plot {dir}/s/results.csv --out {dir}/s/results.csv", 1,
     "is also the input results {dir}/s/results.csv"},
    {"outputs", "plot: --out links to /dev/null",
     [](const std::string& dir) {
       results_csv(dir);
       fs::create_symlink("/dev/null", dir + "/fig.svg");
     },
     "plot {dir}/s/results.csv --out {dir}/fig.svg", 1, "--out {dir}/fig.svg: is a link to a character device"},
    {"outputs", "plot: --out is a FIFO",
     [](const std::string& dir) {
       results_csv(dir);
       fifo(dir + "/fig.svg");
     },
     "plot {dir}/s/results.csv --out {dir}/fig.svg", 1, "--out {dir}/fig.svg: is a FIFO"},

    // ---- directory outputs: train --out, step-dump --out -----------------------------------
    {"outputs", "train: --out is the dataset directory",
     copy_data_and_config,
     "train --config {dir}/c.yaml --out {dir}/d", 1,
     "--out {dir}/d: is the dataset directory {dir}/d; a run's files would mix with the dataset's"},
    {"outputs", "train: --out inside the dataset directory (another spelling)",
     copy_data_and_config,
     "train --config {dir}/c.yaml --out {dir}/d/../d/run", 1,
     "is inside the dataset directory {dir}/d"},
    {"outputs", "step-dump: --checkpoint is a file step-dump writes into --out",
     [](const std::string& dir) {
       source_text(dir);
       fs::create_directories(dir + "/o");
       rmt::write_file_atomic(dir + "/o/params.safetensors", "x");
       rmt::write_file_atomic(dir + "/in.npy", "x");
       rmt::write_file_atomic(dir + "/tg.npy", "x");
     },
     "step-dump --checkpoint {dir}/o/params.safetensors --input {dir}/in.npy --target {dir}/tg.npy --out {dir}/o "
     "--segment-length 2 --bptt 1", 1,
     "--out {dir}/o/params.safetensors: is also the input --checkpoint {dir}/o/params.safetensors"},
});
