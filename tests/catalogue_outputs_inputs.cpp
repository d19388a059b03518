// Catalogue of bad inputs (tests/catalogue.h): an output that is one of the command's inputs,
// refused before anything is written (lib/files/output_safety.h check_outputs_not_inputs), also
// where it is reached by another spelling, a symlink or a hard link: `rmt eval --predictions`
// over the run's checkpoint, files or dataset, `rmt train` and `rmt sweep` over the config or
// sweep file they read, and `rmt data import` over its source arrays.
// The other commands' cases are in catalogue_outputs.cpp and catalogue_attn.cpp.
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "lib/files/io.h"
#include "tests/catalogue.h"
#include "tests/import_fixtures.h"

namespace fs = std::filesystem;

namespace {

void hard_link(const std::string& target, const std::string& link) {
  if (::link(target.c_str(), link.c_str()) != 0) throw std::runtime_error("catalogue setup: link failed: " + link);
}

// {dir}/src: the sorting task of tests/import_fixtures.h, as a user's NAME_{split}_{X,y}.npy.
void sort_source(const std::string& dir) {
  fs::create_directories(dir + "/src");
  write_sort_task(dir + "/src", sort_task());
}

}  // namespace

RMT_CATALOGUE({
    // ---- eval --predictions: the run's checkpoint and files, the dataset evaluated ---------
    {"outputs", "eval: --predictions is the checkpoint evaluated (best)", trained_copy_run,
     "eval {dir}/run --predictions {dir}/run/best.safetensors", 1,
     "--predictions {dir}/run/best.safetensors: is also the input --checkpoint {dir}/run/best.safetensors; "
     "writing it would destroy the input"},
    {"outputs", "eval: --predictions is --checkpoint last, spelt another way", trained_copy_run,
     "eval {dir}/run --checkpoint last --predictions {dir}/run/../run/last.safetensors", 1,
     "--predictions {dir}/run/../run/last.safetensors: is also the input --checkpoint {dir}/run/last.safetensors"},
    {"outputs", "eval: --predictions is a symlink to the checkpoint",
     [](const std::string& dir) {
       trained_copy_run(dir);
       fs::create_symlink(dir + "/run/best.safetensors", dir + "/p.jsonl");
     },
     "eval {dir}/run --predictions {dir}/p.jsonl", 1,
     "--predictions {dir}/p.jsonl: is also the input --checkpoint {dir}/run/best.safetensors"},
    {"outputs", "eval: --predictions is a --checkpoint file given by path",
     [](const std::string& dir) {
       trained_copy_run(dir);
       fs::copy_file(dir + "/run/best.safetensors", dir + "/ck.safetensors");
     },
     "eval {dir}/run --checkpoint {dir}/ck.safetensors --predictions {dir}/./ck.safetensors", 1,
     "is also the input --checkpoint {dir}/ck.safetensors"},
    {"outputs", "eval: --predictions is the run's config.yaml", trained_copy_run,
     "eval {dir}/run --predictions {dir}/run/config.yaml", 1,
     "--predictions {dir}/run/config.yaml: is also the input --run {dir}/run/config.yaml"},
    {"outputs", "eval: --predictions is the run's results.json", trained_copy_run,
     "eval --run {dir}/run --predictions {dir}/run/results.json", 1,
     "--predictions {dir}/run/results.json: is also the input --run {dir}/run/results.json"},
    {"outputs", "eval: --predictions is a split file of the run's dataset", trained_copy_run,
     "eval {dir}/run --predictions {dir}/d/copy_test_X.npy", 1,
     "--predictions {dir}/d/copy_test_X.npy: is also the input (the run's dataset) {dir}/d/copy_test_X.npy"},
    {"outputs", "eval: --predictions is meta.yaml of --data", trained_copy_run,
     "eval {dir}/run --data {dir}/d --predictions {dir}/d/meta.yaml", 1,
     "--predictions {dir}/d/meta.yaml: is also the input --data {dir}/d/meta.yaml"},
    {"outputs", "eval: --predictions is a hard link to a dataset file",
     [](const std::string& dir) {
       trained_copy_run(dir);
       hard_link(dir + "/d/copy_val_y.npy", dir + "/p.jsonl");
     },
     "eval {dir}/run --predictions {dir}/p.jsonl", 1,
     "--predictions {dir}/p.jsonl: is also the input (the run's dataset) {dir}/d/copy_val_y.npy"},

    // ---- train --out and sweep --runs-dir: the files they write over the file they read ------
    {"outputs", "train: a run file of --out is a hard link to --config",
     [](const std::string& dir) {
       copy_data_and_config(dir);
       fs::create_directories(dir + "/run");
       hard_link(dir + "/c.yaml", dir + "/run/metrics.jsonl");
     },
     "train --config {dir}/c.yaml --out {dir}/run", 1,
     "--out {dir}/run/metrics.jsonl: is also the input --config {dir}/c.yaml"},
    {"outputs", "sweep --collect: the sweep file is the results.csv it writes (another spelling)",
     [](const std::string& dir) {
       copy_data_and_config(dir);
       fs::create_directories(dir + "/runs/results");
       rmt::write_file_atomic(dir + "/runs/results/results.csv",
                              "data: {dir: " + dir + "/d}\nbase: {model: {n_layer: 1}}\ngrid: {segments: [1]}\n");
     },
     "sweep {dir}/runs/results/results.csv --runs-dir {dir}/runs/../runs --collect", 1,
     "--runs-dir {dir}/runs/../runs/results/results.csv: is also the input the sweep file "
     "{dir}/runs/results/results.csv"},

    // ---- data import: the dataset written over the user's source arrays ---------------------
    {"outputs", "data import: --out is the source directory", sort_source,
     "data import {dir}/src --out {dir}/src", 1,
     "--out {dir}/src: is the source directory {dir}/src; importing there would write the dataset over your arrays"},
    {"outputs", "data import --force: --out is the source directory, spelt another way", sort_source,
     "data import {dir}/src --out {dir}/src/../src --force", 1,
     "--out {dir}/src/../src: is the source directory {dir}/src"},
    {"outputs", "data import --force: --out is a symlink to the source directory",
     [](const std::string& dir) {
       sort_source(dir);
       fs::create_directory_symlink(dir + "/src", dir + "/link");
     },
     "data import {dir}/src --out {dir}/link --force", 1, "--out {dir}/link: is the source directory {dir}/src"},
    {"outputs", "data import: an output file of --out is a hard link to a source array (no --force advice)",
     [](const std::string& dir) {
       sort_source(dir);
       fs::create_directories(dir + "/d");
       hard_link(dir + "/src/sort_val_y.npy", dir + "/d/sort_val_y.npy");
     },
     "data import {dir}/src --out {dir}/d", 1,
     "--out {dir}/d/sort_val_y.npy: is also the input SRC {dir}/src/sort_val_y.npy"},
    {"outputs", "data import --force: an output file of --out is a symlink to a source array",
     [](const std::string& dir) {
       sort_source(dir);
       fs::create_directories(dir + "/d");
       fs::create_symlink(dir + "/src/sort_train_X.npy", dir + "/d/sort_train_X.npy");
     },
     "data import {dir}/src --out {dir}/d --force", 1,
     "--out {dir}/d/sort_train_X.npy: is also the input SRC {dir}/src/sort_train_X.npy"},
    {"outputs", "data import --force: --vocab is meta.yaml of --out",
     [](const std::string& dir) {
       sort_source(dir);
       fs::create_directories(dir + "/d");
       std::string symbols;
       for (int id = 0; id < 10; ++id) symbols += std::to_string(id) + "\n";
       rmt::write_file_atomic(dir + "/d/meta.yaml", symbols);
     },
     "data import {dir}/src --out {dir}/d --vocab {dir}/d/meta.yaml --force", 1,
     "--out {dir}/d/meta.yaml: is also the input --vocab {dir}/d/meta.yaml"},
});
