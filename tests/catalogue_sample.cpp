// Catalogue of bad inputs (tests/catalogue.h) for `rmt sample`. Each case builds a run directory
// in {dir}/run as `rmt train` leaves it (config.yaml, best.safetensors) without training: a
// tiny language model (1 layer, segments of 8 bytes) at its initial weights, so that a case
// runs in well under a second. Sampling needs no dataset, so none is written.
#include <cmath>
#include <filesystem>
#include <string>

#include "lib/core/model.h"
#include "lib/files/io.h"
#include "lib/run/checkpoint.h"
#include "lib/run/config.h"
#include "tests/catalogue.h"

namespace fs = std::filesystem;

namespace {

rmt::Config lm_config(const std::string& dir) {
  rmt::Config c;
  c.data = dir + "/t";
  c.segment_length = 8;
  c.bptt = 1;
  c.model.kind = "rmt";
  c.model.n_token = 256;
  c.model.n_layer = 1, c.model.n_head = 2, c.model.d_head = 4, c.model.d_model = 8;
  c.model.d_inner = 16, c.model.num_mem_tokens = 2;
  rmt::resolve_kind(c.model);
  return c;
}

void save_model(const rmt::ModelConfig& mc, const std::string& path, float poison = 0) {
  rmt::Model model(mc);
  model.init_weights(1);
  if (poison != 0) model.params.write(3, &poison, 1);
  rmt::save_checkpoint(path, model, model.params);
}

// {dir}/run: config.yaml of a tiny language model and, with `checkpoint`, its best.safetensors.
void tiny_lm_run(const std::string& dir, bool checkpoint = true) {
  const rmt::Config c = lm_config(dir);
  fs::create_directories(dir + "/run");
  rmt::write_file_atomic(dir + "/run/config.yaml", rmt::to_yaml(c));
  if (checkpoint) save_model(c.model, dir + "/run/best.safetensors");
}

// {dir}/run of an algorithmic task (copy in 3 segments) with a checkpoint.
void copy_run(const std::string& dir) {
  rmt::Config c;
  c.data = dir + "/c";
  c.segments = 3;
  c.model.kind = "rmt";
  c.model.n_token = 12;
  c.model.n_layer = 1, c.model.n_head = 2, c.model.d_head = 4, c.model.d_model = 8;
  c.model.d_inner = 16, c.model.num_mem_tokens = 2;
  rmt::resolve_kind(c.model);
  fs::create_directories(dir + "/run");
  rmt::write_file_atomic(dir + "/run/config.yaml", rmt::to_yaml(c));
  save_model(c.model, dir + "/run/best.safetensors");
}

}  // namespace

RMT_CATALOGUE({
    {"sample", "a run of an algorithmic task", copy_run, "sample {dir}/run --prompt ab", 1,
     "/c in segments of a sample (segments: 3); rmt sample needs a run trained on a text dataset "
     "(rmt generate text, segment_length set)"},
    {"sample", "empty prompt", [](const std::string& d) { tiny_lm_run(d); },
     "sample {dir}/run --prompt ''", 1,
     "--prompt is empty: the model predicts each byte from the bytes before it and has no "
     "start-of-text symbol; give at least one byte"},
    {"sample", "no bytes to generate", [](const std::string& d) { tiny_lm_run(d); },
     "sample {dir}/run --prompt ab --bytes 0", 1, "--bytes must be from 1 to 1000000 (got 0)"},
    {"sample", "more bytes than a sample may have", [](const std::string& d) { tiny_lm_run(d); },
     "sample {dir}/run --prompt ab --bytes 1000001", 1, "--bytes must be from 1 to 1000000 (got 1000001)"},
    {"sample", "negative temperature", [](const std::string& d) { tiny_lm_run(d); },
     "sample {dir}/run --prompt ab --temperature -0.5", 1, "--temperature must be"},
    {"sample", "temperature not a number", [](const std::string& d) { tiny_lm_run(d); },
     "sample {dir}/run --prompt ab --temperature nan", 1, "--temperature must be"},
    {"sample", "negative seed", [](const std::string& d) { tiny_lm_run(d); },
     "sample {dir}/run --prompt ab --temperature 1 --seed -1", 1, "--seed"},
    {"sample", "negative thread count", [](const std::string& d) { tiny_lm_run(d); },
     "sample {dir}/run --prompt ab --threads -1", 1, "--threads must be from 0 to 1024 (got -1)"},
    {"sample", "run directory missing", nullptr, "sample {dir}/nowhere --prompt ab", 1, "/nowhere: no such directory"},
    {"sample", "directory that is not a run", [](const std::string& d) { fs::create_directories(d + "/run"); },
     "sample {dir}/run --prompt ab", 1, "/run: no config.yaml (is this an rmt run directory?)"},
    {"sample", "run whose config.yaml is empty (the defaults were described as the run)",
     [](const std::string& d) {
       tiny_lm_run(d);
       rmt::write_file_atomic(d + "/run/config.yaml", "");
     },
     "sample {dir}/run --prompt ab", 1,
     "/run/config.yaml: holds no config keys; rmt train writes every key of the run there"},
    {"eval", "run whose config.yaml is an empty mapping",
     [](const std::string& d) {
       copy_run(d);
       rmt::write_file_atomic(d + "/run/config.yaml", "{}\n");
     },
     "eval --run {dir}/run", 1, "/run/config.yaml: holds no config keys"},
    {"sample", "run without a checkpoint", [](const std::string& d) { tiny_lm_run(d, false); },
     "sample {dir}/run --prompt ab", 1,
     "/run/best.safetensors does not exist: the run has no checkpoint yet (rmt train writes one at "
     "each evaluation)"},
    {"sample", "--checkpoint file missing", [](const std::string& d) { tiny_lm_run(d); },
     "sample {dir}/run --prompt ab --checkpoint {dir}/other.safetensors", 1,
     "/other.safetensors does not exist"},
    {"sample", "checkpoint of another model",
     [](const std::string& d) {
       tiny_lm_run(d);
       rmt::ModelConfig other = lm_config(d).model;
       other.n_layer = 2;
       save_model(other, d + "/two_layers.safetensors");
     },
     "sample {dir}/run --prompt ab --checkpoint {dir}/two_layers.safetensors", 1,
     "two_layers.safetensors: model.n_layer is 2 in the checkpoint but 1 in "},
    {"sample", "checkpoint of a copy model (12 ids)",
     [](const std::string& d) {
       tiny_lm_run(d);
       rmt::ModelConfig copy = lm_config(d).model;
       copy.n_token = 12;
       save_model(copy, d + "/copy.safetensors");
     },
     "sample {dir}/run --prompt ab --checkpoint {dir}/copy.safetensors", 1,
     "copy.safetensors: the checkpoint's vocabulary has 12 ids but dataset "},
    {"sample", "checkpoint holding NaN",
     [](const std::string& d) {
       tiny_lm_run(d, false);
       save_model(lm_config(d).model, d + "/run/best.safetensors", std::nanf(""));
     },
     "sample {dir}/run --prompt ab", 1, "tensor 'mem_tokens' holds a non-finite value (nan at index 3)"},
    {"cli-usage", "sample without --prompt", [](const std::string& d) { tiny_lm_run(d); },
     "sample {dir}/run", 2, "missing required option --prompt; see 'rmt sample --help'"},
    {"cli-usage", "sample without a run", nullptr, "sample --prompt ab", 2,
     "missing argument run (Run directory written by rmt train on a text dataset); see 'rmt sample --help'"},
});
