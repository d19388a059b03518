// Catalogue of bad inputs (tests/catalogue.h) for `rmt attn`. Each case builds a run directory
// in {dir}/run as `rmt train` leaves it (config.yaml, best.safetensors) without training: a tiny
// copy dataset (20 / 5 / 5 samples) and a freshly initialised tiny rmt model (2 layers, 2 heads,
// 3 segments), so a case runs in well under a second.
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "lib/core/model.h"
#include "lib/files/io.h"
#include "lib/run/checkpoint.h"
#include "lib/run/config.h"
#include "lib/run/train.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tests/catalogue.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;

namespace {

// {dir}/d: copy L 4, 4 symbols; {dir}/run/config.yaml; with `checkpoint`, {dir}/run/best.safetensors.
void tiny_run(const std::string& dir, bool checkpoint = true) {
  rmt::GenerateRequest g;
  g.task = rmt::resolve_task("copy", 4, 4);
  g.sizes = {20, 5, 5};
  g.seed = 1;
  g.out_dir = dir + "/d";
  rmt::generate_dataset(g);
  rmt::Config c;
  c.data = g.out_dir;
  c.segments = 3;
  c.model.kind = "rmt";
  c.model.n_layer = 2, c.model.n_head = 2, c.model.d_head = 4, c.model.d_model = 8;
  c.model.d_inner = 16, c.model.num_mem_tokens = 2;
  rmt::RunSetup run = rmt::prepare_run(c);
  fs::create_directories(dir + "/run");
  rmt::write_file_atomic(dir + "/run/config.yaml", rmt::to_yaml(run.config));
  if (!checkpoint) return;
  rmt::Model model(run.config.model);
  model.init_weights(1);
  rmt::save_checkpoint(dir + "/run/best.safetensors", model, model.params);
}

}  // namespace

RMT_CATALOGUE({
    {"attn", "run without a checkpoint", [](const std::string& d) { tiny_run(d, false); },
     "attn --run {dir}/run --dump {dir}/a.json", 1,
     "best.safetensors does not exist: the run has no checkpoint yet"},
    {"attn", "layer out of range", [](const std::string& d) { tiny_run(d); },
     "attn --run {dir}/run --layer 2 --dump {dir}/a.json", 1,
     "--layer 2 is out of range: the model has 2 layers (valid: 0..1)"},
    {"attn", "segment out of range", [](const std::string& d) { tiny_run(d); },
     "attn --run {dir}/run --segment 3 --dump {dir}/a.json", 1,
     "--segment 3 is out of range: the run has 3 segments (4,4,4) (valid: 0..2)"},
    {"attn", "sample past the split", [](const std::string& d) { tiny_run(d); },
     "attn --run {dir}/run --split val --sample 5 --dump {dir}/a.json", 1,
     "has 5 samples (valid: 0..4)"},
    {"attn", "picture of an unknown format", [](const std::string& d) { tiny_run(d); },
     "attn --run {dir}/run --out {dir}/a.jpg", 1,
     "/a.jpg: the figure file must end in .svg, .png, .pdf or .eps"},
    {"attn", "the run's dataset changed since training (results.json records another)",
     [](const std::string& d) {
       tiny_run(d);
       rmt::write_file_atomic(d + "/run/results.json", "{\"dataset_fingerprint\": \"0123abcd\"}\n");
     },
     "attn --run {dir}/run --dump {dir}/a.json", 1, "the run recorded 0123abcd; regenerate it"},
    {"attn", "the run's dataset changed, a picture asked for",
     [](const std::string& d) {
       tiny_run(d);
       rmt::write_file_atomic(d + "/run/results.json", "{\"dataset_fingerprint\": \"0123abcd\"}\n");
     },
     "attn --run {dir}/run --out {dir}/a.svg", 1, "or pass --allow-changed-data"},
    // ---- outputs that would destroy an input, or a special file (check_outputs_safe) -------
    {"attn", "--dump onto the checkpoint it reads", [](const std::string& d) { tiny_run(d); },
     "attn --run {dir}/run --dump {dir}/run/best.safetensors", 1,
     "--dump {dir}/run/best.safetensors: is also the input --checkpoint {dir}/run/best.safetensors"},
    {"attn", "--out onto the run's config.yaml", [](const std::string& d) { tiny_run(d); },
     "attn --run {dir}/run --out {dir}/run/config.yaml.svg --dump {dir}/run/config.yaml", 1,
     "is also the input --run {dir}/run/config.yaml"},
    {"attn", "--dump onto a file of the run's dataset", [](const std::string& d) { tiny_run(d); },
     "attn --run {dir}/run --dump {dir}/d/meta.yaml", 1, "is also the input (the run's dataset)"},
    {"attn", "--dump and --out the same file", [](const std::string& d) { tiny_run(d); },
     "attn --run {dir}/run --dump {dir}/x.svg --out {dir}/x.svg", 1,
     "--dump {dir}/x.svg and --out {dir}/x.svg are the same file"},
    {"attn", "--dump onto a FIFO",
     [](const std::string& d) {
       tiny_run(d);
       REQUIRE(::mkfifo((d + "/pipe.json").c_str(), 0644) == 0);
     },
     "attn --run {dir}/run --dump {dir}/pipe.json", 1, "--dump {dir}/pipe.json: is a FIFO"},
    {"attn", "--dump onto a link to /dev/null",
     [](const std::string& d) {
       tiny_run(d);
       fs::create_symlink("/dev/null", d + "/null.json");
     },
     "attn --run {dir}/run --dump {dir}/null.json", 1, "is a link to a character device"},
    {"attn", "picture under a regular file", [](const std::string& d) {
       tiny_run(d);
       rmt::write_file_atomic(d + "/file", "x");
     },
     "attn --run {dir}/run --out {dir}/file/a.png", 1,
     "/file/a.png: cannot create its directory"},
});
