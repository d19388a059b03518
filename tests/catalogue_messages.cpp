// Catalogue of bad inputs (tests/catalogue.h): messages that pointed the wrong way. A /proc file
// (size 0, content made as it is read) was "empty"; a file given for a dataset directory "did not
// exist"; `--set segment_length=0` on text was told to set segment_length; `train --resume`
// without --config used the defaults instead of the run's config.yaml; a resume on another config
// did not say which key differs.
#include <fstream>
#include <string>

#include <doctest/doctest.h>

#include "lib/files/io.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tasks/text.h"
#include "tests/catalogue.h"
#include "tests/cli.h"

namespace {

// {dir}/d: a tiny copy dataset; {dir}/c.yaml: 4 steps of a tiny rmt model on it.
void copy_config(const std::string& dir) {
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task("copy", 5, 4);
  r.sizes = {40, 8, 8};
  r.seed = 1;
  r.out_dir = dir + "/d";
  rmt::generate_dataset(r);
  std::ofstream(dir + "/c.yaml") << "data: " << dir << "/d\nsegments: 3\n"
                                 << "model: {kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, "
                                    "d_inner: 16, dropout: 0.0, num_mem_tokens: 2}\n"
                                 << "train: {batch_size: 4, lr: 1.0e-3, max_steps: 4, eval_every: 2, "
                                    "log_every: 1, seed: 1, threads: 1}\n";
}

// copy_config and {dir}/run, killed after step 3 (a checkpoint at step 2): a run to resume.
void killed_run(const std::string& dir) {
  copy_config(dir);
  Run r = rmt_run("train --config " + dir + "/c.yaml --out " + dir + "/run --abort-after-step 3");
  REQUIRE_MESSAGE(r.status == 86, r.output);
}

// {dir}/t: a text dataset of 2000 bytes.
void text_data(const std::string& dir) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "the quick brown fox\n";
  rmt::write_file_atomic(dir + "/t.txt", text);
  rmt::TextGenerateRequest r;
  r.input = dir + "/t.txt";
  r.out_dir = dir + "/t";
  rmt::generate_text_dataset(r);
}

}  // namespace

RMT_CATALOGUE({
    {"generate", "text --input a /proc file (size 0, has content)", nullptr,
     "generate text --input /proc/self/status --out {dir}/t", 1,
     "--input /proc/self/status reports a size of 0 bytes but has content (a /proc or /sys file"},
    {"train-data", "data: a regular file, not a dataset directory",
     [](const std::string& dir) {
       copy_config(dir);
       rmt::write_file_atomic(dir + "/f", "x");
     },
     "train --config {dir}/c.yaml --set data={dir}/f --out {dir}/run", 1,
     "dataset directory {dir}/f is a file, not a directory"},
    {"train-data", "data: a directory that does not exist", copy_config,
     "train --config {dir}/c.yaml --set data={dir}/nope --out {dir}/run", 1,
     "dataset directory {dir}/nope does not exist"},
    {"--set", "segment_length=0 on a text dataset", text_data,
     "train --set data={dir}/t --set segment_length=0 --out {dir}/run", 1,
     "expected an integer >= 1"},
    {"config", "segment_length: 0 in a config file",
     [](const std::string& dir) {
       text_data(dir);
       std::ofstream(dir + "/lm.yaml") << "data: " << dir << "/t\nsegment_length: 0\n";
     },
     "train --config {dir}/lm.yaml --out {dir}/run", 1, "expected an integer >= 1"},
    {"config", "armt with model.d_mem out of range", copy_config,
     "train --config {dir}/c.yaml --set model.kind=armt --set model.d_mem=5000 --out {dir}/run", 1,
     "expected an integer >= 1 (at most 4096)"},
    {"config", "armt on a GPU before one has run it", copy_config,
     "train --config {dir}/c.yaml --set model.kind=armt --set device=cuda --out {dir}/run", 1,
     "model.kind armt has not yet run on a GPU"},
    {"config", "armt on a text dataset", text_data,
     "train --set data={dir}/t --set segment_length=8 --set model.kind=armt --out {dir}/run", 1,
     "model.kind armt on a text dataset (segment_length 8) is not supported yet"},
    {"resume", "another config names the key that differs", killed_run,
     "train --config {dir}/c.yaml --set train.lr=0.5 --out {dir}/run --resume", 1,
     "the saved config differs from this one: train.lr is 0.001 in the saved config but 0.5 in this one"},
    {"resume", "another model size names the key that differs", killed_run,
     "train --config {dir}/c.yaml --set model.d_inner=32 --out {dir}/run --resume", 1,
     "model.d_inner is 16 in the saved config but 32 in this one"},
    {"resume", "without --config: the run's config.yaml, not the defaults", killed_run,
     "train --out {dir}/run --resume --set train.seed=7", 1,
     "the saved config differs from this one: train.seed is 1 in the saved config but 7 in this one"},
});
