// Catalogue of bad inputs (tests/catalogue.h) of backend choice, `rmt step-dump --device`, and of
// step-dump's AdamW option.
#include <string>
#include <vector>

#include "lib/core/model.h"
#include "lib/files/npy.h"
#include "lib/run/checkpoint.h"
#include "tests/catalogue.h"
#include "tests/cli.h"

namespace {

// {dir}/ck.safetensors (a tiny rmt model, vocabulary 6) and a [2, 6] batch in {dir}/in.npy, tg.npy.
void step_files(const std::string& dir) {
  rmt::ModelConfig c;
  c.kind = "rmt";
  c.n_token = 6, c.n_layer = 1, c.n_head = 2, c.d_head = 4, c.d_model = 8, c.d_inner = 16;
  c.num_mem_tokens = 2;
  rmt::Model model(c);
  model.init_weights(1);
  rmt::save_checkpoint(dir + "/ck.safetensors", model, model.params);
  std::vector<int64_t> in(12, 2), tg(12, 3);
  rmt::write_npy_int64(dir + "/in.npy", {2, 6}, in.data());
  rmt::write_npy_int64(dir + "/tg.npy", {2, 6}, tg.data());
}

const char* kStep = "step-dump --checkpoint {dir}/ck.safetensors --input {dir}/in.npy --target {dir}/tg.npy "
                    "--out {dir}/o --segments 2 --answer-size 3 ";

}  // namespace

RMT_CATALOGUE({
    {"step-dump", "--device cuda without a usable CUDA device", step_files,
     std::string(kStep) + "--device cuda", 1, kCudaUnavailable},
    {"step-dump", "--device of an unknown name", step_files,
     std::string(kStep) + "--device gpu0", 1, "unknown device 'gpu0' (devices here: cpu"},
    {"step-dump", "LM steps: --device cuda without a usable CUDA device", step_files,
     std::string(kStep).substr(0, std::string(kStep).find("--segments")) +
         "--segment-length 3 --bptt 1 --device cuda", 1, kCudaUnavailable},
    {"step-dump", "a negative --weight-decay", step_files, std::string(kStep) + "--adam-steps 2 --weight-decay -0.1",
     1, "--weight-decay must be at least 0 (got -0.1)"},
});
