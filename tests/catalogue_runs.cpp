// Catalogue of bad inputs (tests/catalogue.h): runs as `rmt train`, `rmt eval` and `rmt step-dump`
// meet them: sizes that do not fit in memory, thread counts, run directories that already hold a
// run, resumes on changed configs or data, checkpoints that are not the run's model or hold NaN.
// Each case starts from a tiny copy dataset ({dir}/d: length 5, 4 symbols, vocabulary 6) and,
// where it needs one, a tiny trained run ({dir}/run: 4 steps, checkpoints at 2 and 4).
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "lib/files/safetensors.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tests/catalogue.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {

void tiny_data(const std::string& out, int symbols = 4, uint64_t seed = 1,
               const std::string& task = "copy", int length = 5) {
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task(task, length, symbols);
  r.sizes = {40, 8, 8};
  r.seed = seed;
  r.out_dir = out;
  r.force = true;
  rmt::generate_dataset(r);
}

const char* kModel =
    "model: {kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, d_inner: 16, "
    "dropout: 0.0, num_mem_tokens: 2}\n";

// {dir}/d and {dir}/c.yaml (4 steps, evaluations at 2 and 4).
void tiny_config(const std::string& dir) {
  tiny_data(dir + "/d");
  std::ofstream(dir + "/c.yaml") << "data: " << dir << "/d\nsegments: 3\n" << kModel
                                 << "train: {batch_size: 4, lr: 1.0e-3, max_steps: 4, "
                                    "eval_every: 2, log_every: 1, seed: 1, threads: 1}\n";
}

std::string train_args(const std::string& dir, const std::string& extra = "") {
  return "train --config " + dir + "/c.yaml --out " + dir + "/run " + extra;
}

// {dir}/run: the tiny run, trained to the end.
void tiny_run(const std::string& dir) {
  tiny_config(dir);
  Run r = rmt_run(train_args(dir));
  REQUIRE_MESSAGE(r.status == 0, r.output);
}

// Replaces a line of a run's config.yaml that starts with `key` (indented as in the file).
void edit_config(const std::string& dir, const std::string& from, const std::string& to) {
  const std::string path = dir + "/run/config.yaml";
  std::string text = rmt::read_file(path);
  const size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  text.replace(at, from.size(), to);
  rmt::write_file_atomic(path, text);
}

// Rewrites a safetensors file with `edit` applied to its tensors and metadata.
template <typename Edit>
void edit_safetensors(const std::string& path, Edit edit) {
  rmt::SafetensorsFile f = rmt::load_safetensors(path);
  edit(f);
  std::vector<rmt::TensorRef> refs;
  for (const auto& [name, t] : f.tensors) refs.push_back({name, t.shape, t.data.data()});
  rmt::save_safetensors(path, refs, f.metadata);
}

void poison(const std::string& path, const std::string& tensor, float value) {
  edit_safetensors(path, [&](rmt::SafetensorsFile& f) {
    REQUIRE(f.tensors.count(tensor));
    f.tensors[tensor].data[1] = value;
  });
}

// step-dump inputs: {dir}/in.npy and {dir}/tg.npy, [2, 15] (the tiny run's positions).
void step_inputs(const std::string& dir, int64_t bad_input = -1, int64_t bad_target = -1,
                 int64_t rows = 2) {
  std::vector<int64_t> in(size_t(rows * 15), 2), tg(size_t(rows * 15), 3);
  if (bad_input >= 0) in[3] = bad_input;
  if (bad_target >= 0) tg[14] = bad_target;  // the last (scored) position of row 0
  rmt::write_npy_int64(dir + "/in.npy", {rows, 15}, in.data());
  rmt::write_npy_int64(dir + "/tg.npy", {rows, 15}, tg.data());
}

std::string step_args(const std::string& extra) {
  return "step-dump --checkpoint {dir}/run/best.safetensors --input {dir}/in.npy --target "
         "{dir}/tg.npy --segments 3 --out {dir}/sd " + extra;
}

}  // namespace

RMT_CATALOGUE({
    // ---- train: the curriculum and the stopping rule (lib/run/curriculum.h) -----------------
    {"train", "mastery curriculum without a target", tiny_config,
     train_args("{dir}", "--set train.curriculum=3 --set train.curriculum_advance=mastery"), 1,
     "train.curriculum_advance mastery needs train.target"},
    {"train", "mastery curriculum of one stage", tiny_config,
     train_args("{dir}", "--set train.curriculum_advance=mastery --set train.target=0.9"), 1,
     "needs train.curriculum >= 2 stages (got 1)"},
    {"train", "curriculum_advance of an unknown kind", tiny_config,
     train_args("{dir}", "--set train.curriculum_advance=sometimes"), 1, "fixed|mastery"},
    {"train", "target above 1", tiny_config, train_args("{dir}", "--set train.target=1.5"), 1,
     "train.target"},
    {"train", "target below 0", tiny_config, train_args("{dir}", "--set train.target=-0.5"), 1,
     "train.target"},
    {"train", "target NaN", tiny_config, train_args("{dir}", "--set train.target=.nan"), 1,
     "train.target"},
    {"train", "target_evals without a target", tiny_config,
     train_args("{dir}", "--set train.target_evals=3"), 1,
     "train.target_evals 3 without train.target"},
    {"train", "target_evals 0", tiny_config,
     train_args("{dir}", "--set train.target=0.9 --set train.target_evals=0"), 1,
     "train.target_evals"},
    // ---- train: sizes, threads, divergence ------------------------------------------------
    {"train", "n_layer of 10^8 (would allocate gigabytes)", tiny_config,
     "train --config {dir}/c.yaml --set model.n_layer=100000000 --out {dir}/run", 1,
     "of memory but"},
    {"train", "num_mem_tokens of 10^7", tiny_config,
     "train --config {dir}/c.yaml --set model.num_mem_tokens=10000000 --out {dir}/run", 1,
     "needs about"},
    {"train", "batch of 10^8", tiny_config,
     "train --config {dir}/c.yaml --set train.batch_size=100000000 --out {dir}/run", 1,
     "reduce the model sizes, the batch size or the segment length"},
    {"eval", "--predictions into a directory", tiny_run, "eval --run {dir}/run --predictions {dir}", 1,
     "is a directory; give the file to write (JSON lines)"},
    {"eval", "a batch of 10^8: what to reduce is the evaluation's (bptt_recompute was advised)", tiny_run,
     "eval --run {dir}/run --batch-size 100000000", 1,
     "evaluate a smaller batch (rmt eval --batch-size) or on a machine with more memory"},
    {"train", "threads 100000", tiny_config,
     "train --config {dir}/c.yaml --set train.threads=100000 --out {dir}/run", 1,
     "invalid value '100000' for 'train.threads': expected a non-negative integer (at most 1024)"},
    {"train", "n_token below the dataset's vocabulary", tiny_config,
     "train --config {dir}/c.yaml --set model.n_token=3 --out {dir}/run", 1,
     "model.n_token 3 is smaller than the dataset's vocabulary (6)"},
    {"train", "non-finite loss before the first checkpoint", tiny_config,
     "train --config {dir}/c.yaml --set train.lr=1e37 --set train.clip=0 --out {dir}/run", 1, "no checkpoint was written yet (the first comes at step 2)"},

    // ---- run-dir --------------------------------------------------------------------------
    {"run-dir", "--out is a file",
     [](const std::string& dir) {
       tiny_config(dir);
       std::ofstream(dir + "/run") << "x";
     },
     "train --config {dir}/c.yaml --out {dir}/run", 1, "exists and is not a directory"},
    {"run-dir", "a finished run, without --resume", tiny_run, "train --config {dir}/c.yaml --out {dir}/run",
     1, "already holds a run; add --resume to continue it from its last checkpoint"},
    {"run-dir", "a run killed before its first checkpoint, without --resume",
     [](const std::string& dir) {
       tiny_config(dir);
       REQUIRE(rmt_run(train_args(dir, "--abort-after-step 1")).status == 86);
     },
     "train --config {dir}/c.yaml --out {dir}/run", 1,
     "stopped before its first checkpoint; add --resume to restart it from step 0"},
    {"run-dir", "eval of a directory that is not a run",
     [](const std::string& dir) { fs::create_directories(dir + "/run"); },
     "eval --run {dir}/run", 1, "no config.yaml (is this an rmt run directory?)"},

    // ---- resume ---------------------------------------------------------------------------
    {"resume", "another config", tiny_run,
     "train --config {dir}/c.yaml --set train.lr=0.5 --out {dir}/run --resume", 1,
     "the saved config differs from this one"},
    {"resume", "another config before the first checkpoint",
     [](const std::string& dir) {
       tiny_config(dir);
       REQUIRE(rmt_run(train_args(dir, "--abort-after-step 1")).status == 86);
     },
     "train --config {dir}/c.yaml --set train.seed=2 --out {dir}/run --resume", 1,
     "the saved config differs from this one"},
    {"resume", "the dataset regenerated in place (other seed)",
     [](const std::string& dir) {
       tiny_config(dir);
       REQUIRE(rmt_run(train_args(dir, "--abort-after-step 3")).status == 86);
       tiny_data(dir + "/d", 4, 2);
     },
     "train --config {dir}/c.yaml --out {dir}/run --resume", 1,
     "changed since the run started: its fingerprint is now"},
    {"resume", "config.yaml deleted",
     [](const std::string& dir) {
       tiny_config(dir);
       REQUIRE(rmt_run(train_args(dir, "--abort-after-step 3")).status == 86);
       fs::remove(dir + "/run/config.yaml");
     },
     "train --config {dir}/c.yaml --out {dir}/run --resume", 1,
     "config.yaml: missing; cannot check that --resume uses the run's config"},
    {"resume", "state with NaN in an Adam moment",
     [](const std::string& dir) {
       tiny_config(dir);
       REQUIRE(rmt_run(train_args(dir, "--abort-after-step 3")).status == 86);
       poison(dir + "/run/state.safetensors", "adam.v", std::numeric_limits<float>::quiet_NaN());
     },
     "train --config {dir}/c.yaml --out {dir}/run --resume", 1,
     "state.safetensors: tensor 'adam.v' holds a non-finite value (nan at index 1)"},
    {"resume", "state without Adam moments",
     [](const std::string& dir) {
       tiny_config(dir);
       REQUIRE(rmt_run(train_args(dir, "--abort-after-step 3")).status == 86);
       edit_safetensors(dir + "/run/state.safetensors",
                        [](rmt::SafetensorsFile& f) { f.tensors.erase("adam.m"); });
     },
     "train --config {dir}/c.yaml --out {dir}/run --resume", 1, "missing 'adam.m'"},

    // ---- checkpoint -----------------------------------------------------------------------
    {"checkpoint", "NaN in best.safetensors",
     [](const std::string& dir) {
       tiny_run(dir);
       poison(dir + "/run/best.safetensors", "layers.0.dec_attn.qkv_net.weight",
              std::numeric_limits<float>::quiet_NaN());
     },
     "eval --run {dir}/run", 1,
     "best.safetensors: tensor 'layers.0.dec_attn.qkv_net.weight' holds a non-finite value (nan"},
    {"checkpoint", "Inf in last.safetensors",
     [](const std::string& dir) {
       tiny_run(dir);
       poison(dir + "/run/last.safetensors", "word_emb.emb_layers.0.weight",
              std::numeric_limits<float>::infinity());
     },
     "eval --run {dir}/run --checkpoint last", 1,
     "tensor 'word_emb.emb_layers.0.weight' holds a non-finite value (inf at index 1)"},
    {"checkpoint", "metadata claims 10^8 layers",
     [](const std::string& dir) {
       tiny_run(dir);
       edit_safetensors(dir + "/run/best.safetensors",
                        [](rmt::SafetensorsFile& f) { f.metadata["n_layer"] = "100000000"; });
       edit_config(dir, "n_layer: 1", "n_layer: 100000000");
     },
     "eval --run {dir}/run", 1, "of memory but"},
    {"checkpoint", "metadata contradicts the tensors",
     [](const std::string& dir) {
       tiny_run(dir);
       edit_safetensors(dir + "/run/best.safetensors",
                        [](rmt::SafetensorsFile& f) { f.metadata["d_inner"] = "32"; });
       edit_config(dir, "d_inner: 16", "d_inner: 32");
     },
     "eval --run {dir}/run", 1, "the metadata describes a rmt model of"},
    {"checkpoint", "metadata size zero",
     [](const std::string& dir) {
       tiny_run(dir);
       edit_safetensors(dir + "/run/best.safetensors",
                        [](rmt::SafetensorsFile& f) { f.metadata["d_head"] = "0"; });
     },
     "eval --run {dir}/run", 1, "model.d_head is 0 in the checkpoint but 4 in"},

    // ---- eval -----------------------------------------------------------------------------
    {"eval", "checkpoint vocabulary smaller than the dataset's",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/d8", 8);
       edit_config(dir, "data: " + dir + "/d", "data: " + dir + "/d8");
       edit_config(dir, "n_token: 6", "n_token: 0");
     },
     "eval --run {dir}/run --allow-changed-data", 1,
     "the checkpoint's vocabulary has 6 ids but dataset"},
    {"eval", "checkpoint of another run (n_layer)",
     [](const std::string& dir) {
       tiny_run(dir);
       edit_config(dir, "n_layer: 1", "n_layer: 2");
     },
     "eval --run {dir}/run", 1, "model.n_layer is 1 in the checkpoint but 2 in"},
    {"eval", "checkpoint of another run (d_model)",
     [](const std::string& dir) {
       tiny_run(dir);
       edit_config(dir, "d_model: 8", "d_model: 16");
     },
     "eval --run {dir}/run", 1, "model.d_model is 8 in the checkpoint but 16 in"},
    {"eval", "checkpoint of another run (memory tokens)",
     [](const std::string& dir) {
       tiny_run(dir);
       edit_config(dir, "num_mem_tokens: 2", "num_mem_tokens: 3");
     },
     "eval --run {dir}/run", 1, "model.num_mem_tokens is 2 in the checkpoint but 3 in"},
    {"eval", "checkpoint of another kind",
     [](const std::string& dir) {
       tiny_run(dir);
       edit_config(dir, "kind: rmt", "kind: mt");
     },
     "eval --run {dir}/run", 1, "model.kind is rmt in the checkpoint but mt in"},
    {"eval", "checkpoint with a larger vocabulary than the config says",
     [](const std::string& dir) {
       tiny_run(dir);
       edit_config(dir, "n_token: 6", "n_token: 7");
     },
     "eval --run {dir}/run", 1, "model.n_token is 6 in the checkpoint but 7 in"},
    {"eval", "--threads 5000", tiny_run, "eval --run {dir}/run --threads 5000", 1,
     "--threads must be from 0 to 1024 (got 5000)"},
    {"eval", "a batch of 10^9", tiny_run, "eval --run {dir}/run --batch-size 1000000000", 1,
     "of memory but"},
    {"eval", "checkpoint file missing", tiny_run, "eval --run {dir}/run --checkpoint {dir}/none.safetensors",
     1, "none.safetensors does not exist"},

    // ---- eval: the run's own dataset changed since it was trained (lib/run/run_data.h) ----
    {"eval", "the run's dataset regenerated in place (other seed)",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/d", 4, 2);
     },
     "eval --run {dir}/run", 1, "changed since run "},
    {"eval", "the run's dataset regenerated, both fingerprints and the ways out named",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/d", 4, 2);
     },
     "eval --run {dir}/run --split val", 1,
     "; regenerate it with the run's options, evaluate on other data with --data, or pass --allow-changed-data"},
    {"eval", "the run's dataset regenerated, results.json gone (state.safetensors records it)",
     [](const std::string& dir) {
       tiny_run(dir);
       fs::remove(dir + "/run/results.json");
       tiny_data(dir + "/d", 4, 2);
     },
     "eval --run {dir}/run --checkpoint last", 1, "its fingerprint is now"},
    {"eval", "config.yaml pointed at another dataset of the task",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/d2", 4, 2);
       edit_config(dir, "data: " + dir + "/d", "data: " + dir + "/d2");
     },
     "eval --run {dir}/run", 1, "/d2 changed since run "},
    {"eval", "results.json of the run is not JSON",
     [](const std::string& dir) {
       tiny_run(dir);
       rmt::write_file_atomic(dir + "/run/results.json", "{\"dataset_fingerprint\": ");
     },
     "eval --run {dir}/run", 1, "results.json: not valid JSON"},

    // ---- eval --data: another dataset of the run's task ---------------------------------
    {"eval-data", "another task (reverse)",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/r", 4, 1, "reverse", 10);
     },
     "eval --run {dir}/run --data {dir}/r", 1, "/r is task reverse, but run "},
    {"eval-data", "another vocabulary (--symbols 8)",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/d8", 8, 1, "copy", 10);
     },
     "eval --run {dir}/run --data {dir}/d8", 1,
     "/d8 has a vocabulary of 10 ids, but run "},
    {"eval-data", "another vocabulary of a BABILong-style task: --noise-words advised, not --symbols",
     [](const std::string& dir) {
       for (const char* words : {"32", "8"}) {
         Run g = rmt_run(fmt::format("generate memorize --length 16 --noise-words {} --train 20 --val 5 --test 5 "
                                     "--out {}/m{}", words, dir, words));
         REQUIRE_MESSAGE(g.status == 0, g.output);
       }
       rmt::write_file_atomic(dir + "/c.yaml", "data: " + dir + "/m32\nsegments: 2\n" + kModel +
                                                   "train: {batch_size: 4, max_steps: 2, eval_every: 2, threads: 1}\n");
       Run r = rmt_run(train_args(dir));
       REQUIRE_MESSAGE(r.status == 0, r.output);
     },
     "eval --run {dir}/run --data {dir}/m8", 1,
     "it was generated with other options (--noise-words, --noise-text?); evaluate on data of the same vocabulary"},
    {"eval-data", "the run's own dataset regenerated with other symbols: it is named, not the evaluated one",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/d", 8);  // after training: the run's ids now mean other symbols
       tiny_data(dir + "/d10", 4, 1, "copy", 10);
     },
     "eval --run {dir}/run --data {dir}/d10", 1,
     "dataset {dir}/d changed since run {dir}/run was trained (the fingerprint the run recorded is "},
    {"eval-data", "the directory does not exist", tiny_run, "eval --run {dir}/run --data {dir}/nope", 1,
     "/nope: no such directory"},
    {"eval-data", "a file, not a directory",
     [](const std::string& dir) {
       tiny_run(dir);
       std::ofstream(dir + "/f") << "x";
     },
     "eval --run {dir}/run --data {dir}/f", 1, "/f: is not a directory"},
    {"eval-data", "meta.yaml is not YAML",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/d10", 4, 1, "copy", 10);
       rmt::write_file_atomic(dir + "/d10/meta.yaml", "task: [copy\n");
     },
     "eval --run {dir}/run --data {dir}/d10", 1, "d10/meta.yaml: not valid YAML"},
    {"eval-data", "meta.yaml contradicts the task",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/d10", 4, 1, "copy", 10);
       std::string meta = rmt::read_file(dir + "/d10/meta.yaml");
       const size_t at = meta.find("answer_size: 20");
       REQUIRE(at != std::string::npos);
       meta.replace(at, 15, "answer_size: 21");
       rmt::write_file_atomic(dir + "/d10/meta.yaml", meta);
     },
     "eval --run {dir}/run --data {dir}/d10", 1, "answer_size is 21, but task copy implies 20"},
    {"eval-data", "--segments more than the positions",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/d10", 4, 1, "copy", 10);
     },
     "eval --run {dir}/run --data {dir}/d10 --segments 31", 1,
     "segments: 31 is more than the 30 input positions of task copy"},
    {"eval-data", "the run's own dataset is gone",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/d10", 4, 1, "copy", 10);
       fs::remove_all(dir + "/d");
     },
     "eval --run {dir}/run --data {dir}/d10", 1, "(the dataset of run "},
    {"eval-data", "a batch of 10^9 on the longer data",
     [](const std::string& dir) {
       tiny_run(dir);
       tiny_data(dir + "/d10", 4, 1, "copy", 10);
     },
     "eval --run {dir}/run --data {dir}/d10 --batch-size 1000000000", 1, "of memory but"},

    // ---- step-dump ------------------------------------------------------------------------
    {"step-dump", "target id past the vocabulary",
     [](const std::string& dir) {
       tiny_run(dir);
       step_inputs(dir, -1, 99);
     },
     step_args("--answer-size 11"), 1,
     "target id 99 at row 0 (a scored position) is outside the checkpoint's vocabulary 0..5"},
    {"step-dump", "negative target id",
     [](const std::string& dir) {
       tiny_run(dir);
       step_inputs(dir, -1, 0);
       std::vector<int64_t> tg(30, 3);
       tg[29] = -7;
       rmt::write_npy_int64(dir + "/tg.npy", {2, 15}, tg.data());
     },
     step_args("--answer-size 11"), 1, "target id -7 at row 1"},
    {"step-dump", "input id past the vocabulary",
     [](const std::string& dir) {
       tiny_run(dir);
       step_inputs(dir, 4294967298LL);  // 2^32 + 2: would pass as 2 after an int32 cast
     },
     step_args("--answer-size 11"), 1, "input id 4294967298 at row 0 is outside"},
    {"step-dump", "answer size 0",
     [](const std::string& dir) {
       tiny_run(dir);
       step_inputs(dir);
     },
     step_args("--answer-size 0"), 1, "--answer-size 0 must be in 1..15"},
    {"step-dump", "answer size past the row",
     [](const std::string& dir) {
       tiny_run(dir);
       step_inputs(dir);
     },
     step_args("--answer-size 16"), 1, "--answer-size 16 must be in 1..15"},
    {"step-dump", "checkpoint with NaN",
     [](const std::string& dir) {
       tiny_run(dir);
       step_inputs(dir);
       poison(dir + "/run/best.safetensors", "r_w_bias", std::numeric_limits<float>::quiet_NaN());
     },
     step_args("--answer-size 11"), 1, "tensor 'r_w_bias' holds a non-finite value"},
});
