// Catalogue of bad inputs (tests/catalogue.h) of language modelling: `rmt step-dump
// --segment-length` (the LM step) and, with text datasets, `rmt train` / `rmt eval` configs that
// mix the LM and the algorithmic settings.
#include <string>
#include <vector>

#include "lib/core/model.h"
#include "lib/files/npy.h"
#include "lib/run/checkpoint.h"
#include "tests/catalogue.h"

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
