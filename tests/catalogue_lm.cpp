// Catalogue of bad inputs (tests/catalogue.h) of language modelling: `rmt step-dump
// --segment-length` (the LM step) and, with text datasets, `rmt train` / `rmt eval` configs that
// mix the LM and the algorithmic settings.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "lib/core/model.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "lib/files/safetensors.h"
#include "lib/run/checkpoint.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tasks/text.h"
#include "tests/catalogue.h"
#include "tests/cli.h"

namespace {

// {dir}/ck.safetensors (a tiny model of `kind`, vocabulary 6) and {dir}/in.npy, {dir}/tg.npy:
// 2 streams of 12 positions.
void lm_step_files(const std::string& dir, const std::string& kind, int64_t bad_target = -1) {
  rmt::ModelConfig c;
  c.kind = kind;
  c.n_token = 6;
  c.n_layer = 1;
  c.n_head = 2;
  c.d_head = 4;
  c.d_model = 8;
  c.d_inner = 16;
  c.mem_len = kind == "xl" || kind == "xl_rmt" ? 4 : 0;
  c.num_mem_tokens = kind == "rmt" || kind == "mt" || kind == "xl_rmt" ? 2 : 0;
  rmt::Model model(c);
  model.init_weights(1);
  rmt::save_checkpoint(dir + "/ck.safetensors", model, model.params);
  std::vector<int64_t> in(24, 2), tg(24, 3);
  if (bad_target >= 0) tg[17] = bad_target;
  rmt::write_npy_int64(dir + "/in.npy", {2, 12}, in.data());
  rmt::write_npy_int64(dir + "/tg.npy", {2, 12}, tg.data());
}

const char* kLmStep = "step-dump --checkpoint {dir}/ck.safetensors --input {dir}/in.npy --target {dir}/tg.npy "
                      "--out {dir}/o ";

}  // namespace

RMT_CATALOGUE({
    {"step-dump", "LM: segment length does not divide the columns",
     [](const std::string& dir) { lm_step_files(dir, "rmt"); },
     std::string(kLmStep) + "--segment-length 5 --bptt 1", 1,
     "has 12 columns, not a whole number of segments of --segment-length 5"},
    {"step-dump", "LM: bptt all with memory tokens",
     [](const std::string& dir) { lm_step_files(dir, "xl_rmt"); },
     std::string(kLmStep) + "--segment-length 4", 1,
     "--bptt all: a language model's streams have no end to back-propagate to"},
    {"step-dump", "LM: target id past the vocabulary",
     [](const std::string& dir) { lm_step_files(dir, "xl", 6); },
     std::string(kLmStep) + "--segment-length 4", 1,
     "tg.npy: id 6 at row 1 is outside the checkpoint's vocabulary 0..5"},
    {"step-dump", "LM: segment length 0",
     [](const std::string& dir) { lm_step_files(dir, "rmt"); },
     std::string(kLmStep) + "--segment-length 0 --bptt 1", 1, "--segment-length must be"},
    {"cli-usage", "step-dump: --segment-length with --answer-size",
     [](const std::string& dir) { lm_step_files(dir, "rmt"); },
     std::string(kLmStep) + "--segment-length 4 --answer-size 3", 2, "excludes"},
    {"cli-usage", "step-dump: --update without --segment-length",
     [](const std::string& dir) { lm_step_files(dir, "rmt"); },
     std::string(kLmStep) + "--answer-size 3 --update", 2, "--update requires --segment-length"},
    {"cli-usage", "step-dump: neither --answer-size nor --segment-length",
     [](const std::string& dir) { lm_step_files(dir, "rmt"); },
     std::string(kLmStep), 2, "missing required option --answer-size"},
});

namespace {

// {dir}/t: a text dataset of 2000 bytes (train 1800, val 100, test 100).
void tiny_text(const std::string& dir) {
  std::string text;
  uint64_t x = 11;
  for (int i = 0; i < 2000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    text += "the quick brown fox\n"[(x >> 33) % 20];
  }
  rmt::write_file_atomic(dir + "/t.txt", text);
  rmt::TextGenerateRequest r;
  r.input = dir + "/t.txt";
  r.out_dir = dir + "/t";
  rmt::generate_text_dataset(r);
}

// {dir}/t and {dir}/lm.yaml: an rmt language model on it, 4 steps.
void tiny_lm_config(const std::string& dir) {
  tiny_text(dir);
  std::ofstream(dir + "/lm.yaml") << "data: " << dir << "/t\nsegment_length: 8\nbptt: 1\n"
                                  << "model: {kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, "
                                     "d_inner: 16, dropout: 0.0, num_mem_tokens: 2}\n"
                                  << "train: {batch_size: 4, lr: 1.0e-3, max_steps: 4, eval_every: 2, "
                                     "log_every: 1, seed: 1, threads: 1}\n";
}

// {dir}/run: the tiny language model, trained to the end (or killed after step 3 with `killed`).
void tiny_lm_run(const std::string& dir, bool killed = false) {
  tiny_lm_config(dir);
  Run r = rmt_run("train --config " + dir + "/lm.yaml --out " + dir + "/run" +
                  (killed ? " --abort-after-step 3" : ""));
  REQUIRE_MESSAGE(r.status == (killed ? 86 : 0), r.output);
}

// {dir}/c: a tiny copy dataset.
void tiny_copy(const std::string& dir) {
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task("copy", 5, 4);
  r.sizes = {40, 8, 8};
  r.out_dir = dir + "/c";
  rmt::generate_dataset(r);
}

// Rewrites state.safetensors of {dir}/run with `edit` applied.
template <typename Edit>
void edit_state(const std::string& dir, Edit edit) {
  const std::string path = dir + "/run/state.safetensors";
  rmt::SafetensorsFile f = rmt::load_safetensors(path);
  edit(f);
  std::vector<rmt::TensorRef> refs;
  for (const auto& [name, t] : f.tensors) refs.push_back({name, t.shape, t.data.data()});
  rmt::save_safetensors(path, refs, f.metadata);
}

const char* kLmTrain = "train --config {dir}/lm.yaml --out {dir}/run ";

}  // namespace

RMT_CATALOGUE({
    // ---- lm-train: language-model configs on text datasets (and the settings that mix) -------
    {"lm-train", "text data without segment_length",
     [](const std::string& dir) {
       tiny_lm_config(dir);
       std::ofstream(dir + "/plain.yaml") << "data: " << dir << "/t\nmodel: {kind: baseline}\n";
     },
     "train --config {dir}/plain.yaml --out {dir}/run", 1,
     "is a byte-level text dataset (rmt generate text): set segment_length"},
    {"lm-train", "segment_length on an algorithmic dataset",
     [](const std::string& dir) { tiny_lm_config(dir), tiny_copy(dir); },
     std::string(kLmTrain) + "--set data={dir}/c", 1,
     "segment_length 8 applies to language models on text datasets (rmt generate text)"},
    {"lm-train", "segment_length longer than the train streams", tiny_lm_config,
     std::string(kLmTrain) + "--set segment_length=450", 1,
     "segment_length 450 is longer than the train split's streams: 1800 bytes in train.batch_size 4 "
     "streams leave 449 target positions each"},
    {"lm-train", "more streams than the val split has bytes for", tiny_lm_config,
     std::string(kLmTrain) + "--set train.batch_size=60", 1,
     "the val split of"},
    {"lm-train", "segments with segment_length", tiny_lm_config,
     std::string(kLmTrain) + "--set segments=4", 1,
     "segments 4 and segment_length 8 are both set"},
    {"lm-train", "train.curriculum with segment_length", tiny_lm_config,
     std::string(kLmTrain) + "--set train.curriculum=2", 1,
     "train.curriculum 2 applies to algorithmic tasks"},
    {"lm-train", "train.target with segment_length", tiny_lm_config,
     std::string(kLmTrain) + "--set train.target=0.9", 1,
     "train.target 0.9 is a validation accuracy to stop at; a language model"},
    {"lm-train", "bptt all with memory tokens", tiny_lm_config,
     std::string(kLmTrain) + "--set bptt=all", 1,
     "bptt all with segment_length 8: a language model's streams have no end"},
    {"lm-train", "n_token below 256", tiny_lm_config,
     std::string(kLmTrain) + "--set model.n_token=100", 1,
     "model.n_token 100 is smaller than a text dataset's vocabulary (256"},
    {"lm-train", "a cache of 10^8 rows", tiny_lm_config,
     std::string(kLmTrain) + "--set model.kind=xl --set model.mem_len=100000000", 1,
     "of memory but"},
    {"lm-train", "resume: the carried memory is missing",
     [](const std::string& dir) {
       tiny_lm_run(dir, true);
       edit_state(dir, [](rmt::SafetensorsFile& f) { REQUIRE(f.tensors.erase("lm.state.0.mem") == 1); });
     },
     std::string(kLmTrain) + "--resume", 1, "missing 'lm.state.0.mem' (the language model's carried state)"},
    {"lm-train", "resume: the streams' position is garbled",
     [](const std::string& dir) {
       tiny_lm_run(dir, true);
       edit_state(dir, [](rmt::SafetensorsFile& f) { f.metadata["lm.next_segment"] = "x2"; });
     },
     std::string(kLmTrain) + "--resume", 1, "metadata 'lm.next_segment' is 'x2', not a count"},
    {"lm-train", "resume: the carried state is at another segment",
     [](const std::string& dir) {
       tiny_lm_run(dir, true);
       edit_state(dir, [](rmt::SafetensorsFile& f) { f.metadata["lm.next_segment"] = "3"; });
     },
     std::string(kLmTrain) + "--resume", 1, "the carried state is at segment 3 of the streams, but step 3 trains on segment 2"},
    {"lm-train", "resume: more carried states than the window keeps",
     [](const std::string& dir) {
       tiny_lm_run(dir, true);
       edit_state(dir, [](rmt::SafetensorsFile& f) { f.metadata["lm.next_segment"] = "1"; });
     },
     std::string(kLmTrain) + "--resume", 1, "a language-model state at segment 1 cannot hold 2 carried states"},
    {"lm-train", "resume: the carried memory holds NaN",
     [](const std::string& dir) {
       tiny_lm_run(dir, true);
       edit_state(dir, [](rmt::SafetensorsFile& f) { f.tensors.at("lm.state.1.mem").data[3] = NAN; });
     },
     std::string(kLmTrain) + "--resume", 1, "tensor 'lm.state.1.mem' holds a non-finite value"},

    // ---- lm-eval: rmt eval of a language model ----------------------------------------------
    {"lm-eval", "--segments on a language model", [](const std::string& dir) { tiny_lm_run(dir); },
     "eval --run {dir}/run --segments 2", 1, "is a language model; it reads its streams in segments of its segment_length (8)"},
    {"lm-eval", "the run's text dataset regenerated from another text",
     [](const std::string& dir) {
       tiny_lm_run(dir);
       std::string text = rmt::read_file(dir + "/t.txt");
       text[5] = text[5] == 'q' ? 'k' : 'q';
       rmt::write_file_atomic(dir + "/t.txt", text);
       rmt::TextGenerateRequest r;
       r.input = dir + "/t.txt";
       r.out_dir = dir + "/t";
       r.force = true;
       rmt::generate_text_dataset(r);
     },
     "eval --run {dir}/run", 1, "/t changed since run "},
    {"lm-eval", "--data of an algorithmic task",
     [](const std::string& dir) { tiny_lm_run(dir), tiny_copy(dir); },
     "eval --run {dir}/run --data {dir}/c", 1, "/c is not a text dataset, but run"},
    {"lm-eval", "--predictions of a language model", [](const std::string& dir) { tiny_lm_run(dir); },
     "eval --run {dir}/run --predictions {dir}/p.jsonl", 1, "is a language model; it has no samples whose answers"},
    {"lm-eval", "--count-non-finite of a language model", [](const std::string& dir) { tiny_lm_run(dir); },
     "eval --run {dir}/run --count-non-finite", 1, "is a language model; its loss is over every position"},
    {"lm-eval", "rmt attn of a language model", [](const std::string& dir) { tiny_lm_run(dir); },
     "attn --run {dir}/run --out {dir}/a.png", 1, "is a language model (segment_length 8, text"},
    {"lm-eval", "more streams than the test split has bytes for", [](const std::string& dir) { tiny_lm_run(dir); },
     "eval --run {dir}/run --batch-size 80", 1, "the test split of"},
    {"lm-eval", "text --data for an algorithmic run",
     [](const std::string& dir) {
       tiny_text(dir);
       tiny_copy(dir);
       std::ofstream(dir + "/c.yaml") << "data: " << dir << "/c\nsegments: 2\nmodel: {kind: baseline, n_layer: 1, "
                                         "n_head: 1, d_head: 4, d_model: 4, d_inner: 8}\n"
                                         "train: {batch_size: 4, max_steps: 2, eval_every: 2, threads: 1}\n";
       Run r = rmt_run("train --config " + dir + "/c.yaml --out " + dir + "/run");
       REQUIRE_MESSAGE(r.status == 0, r.output);
     },
     "eval --run {dir}/run --data {dir}/t", 1, "is a byte-level text dataset"},
});
