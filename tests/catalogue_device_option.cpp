// Catalogue of bad inputs (tests/catalogue.h) of the device a command runs on: `--device` on
// rmt train, eval, bench, sweep, attn and sample, and the config's `device:` key. Without a usable
// CUDA device (a build without the backend, or none visible: the unit suite hides GPUs),
// `--device cuda` must be one clear error line (exit 1) before anything is written or run, and so
// must a name no build has. (step-dump's --device: tests/catalogue_device.cpp.)
#include <filesystem>
#include <fstream>
#include <string>

#include "lib/core/model.h"
#include "lib/files/io.h"
#include "lib/run/checkpoint.h"
#include "lib/run/config.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tests/catalogue.h"
#include "tests/cli.h"

namespace {

// {dir}/d (a tiny copy dataset) and {dir}/c.yaml (4 steps of a tiny rmt model).
void device_config(const std::string& dir) {
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task("copy", 5, 4);
  r.sizes = {40, 8, 8};
  r.seed = 1;
  r.out_dir = dir + "/d";
  r.force = true;
  rmt::generate_dataset(r);
  std::ofstream(dir + "/c.yaml")
      << "data: " << dir << "/d\nsegments: 3\n"
      << "model: {kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, d_inner: 16, "
         "dropout: 0.0, num_mem_tokens: 2}\n"
      << "train: {batch_size: 4, lr: 1.0e-3, max_steps: 2, eval_every: 2, log_every: 1, seed: 1, "
         "threads: 1}\n";
}

// {dir}/run: the tiny run, trained (on the cpu).
void device_run(const std::string& dir) {
  device_config(dir);
  Run r = rmt_run("train --config " + dir + "/c.yaml --out " + dir + "/run");
  REQUIRE_MESSAGE(r.status == 0, r.output);
}

// The tiny run, its config.yaml then saying it ran on `device` (as if trained elsewhere).
void run_trained_on(const std::string& dir, const std::string& device) {
  device_run(dir);
  const std::string path = dir + "/run/config.yaml";
  std::string text = rmt::read_file(path);
  const size_t at = text.find("device: cpu\n");
  REQUIRE(at != std::string::npos);
  text.replace(at, 12, "device: " + device + "\n");
  std::ofstream(path) << text;
}

// {dir}/s.yaml: a two-run sweep of the tiny task; base_extra goes into its base: block.
void device_sweep(const std::string& dir, const std::string& base_extra = "") {
  std::ofstream(dir + "/s.yaml")
      << "data: {task: copy, length: 5, symbols: 4, train: 40, val: 8, test: 8}\n"
      << "base:\n" << base_extra
      << "  model: {n_layer: 1, n_head: 2, d_head: 4, d_model: 8, d_inner: 16}\n"
      << "  train: {batch_size: 4, max_steps: 2, eval_every: 2}\n"
      << "grid: {model.kind: [baseline], segments: [1, 3]}\n";
}

// {dir}/run: a tiny language model's run directory (config.yaml saying `device`, its initial
// weights as best.safetensors), as rmt sample reads it; no dataset is needed.
void lm_run(const std::string& dir, const std::string& device) {
  rmt::Config c;
  c.data = dir + "/t";
  c.segment_length = 8;
  c.bptt = 1;
  c.device = device;
  c.model.kind = "rmt";
  c.model.n_token = 256;
  c.model.n_layer = 1, c.model.n_head = 2, c.model.d_head = 4, c.model.d_model = 8;
  c.model.d_inner = 16, c.model.num_mem_tokens = 2;
  rmt::resolve_kind(c.model);
  std::filesystem::create_directories(dir + "/run");
  rmt::write_file_atomic(dir + "/run/config.yaml", rmt::to_yaml(c));
  rmt::Model model(c.model, rmt::cpu_backend());
  model.init_weights(1);
  rmt::save_checkpoint(dir + "/run/best.safetensors", model, model.params);
}

// {dir}/m.yaml: a reproduction of one sweep item, the tiny sweep {dir}/s.yaml.
void device_manifest(const std::string& dir) {
  device_sweep(dir);
  std::ofstream(dir + "/p.yaml") << "{}\n";
  std::ofstream(dir + "/m.yaml") << "paper: p.yaml\nitems:\n  tiny:\n    kind: sweep\n    title: t\n    paper_says: p\n"
                                 << "    sweep: s.yaml\n    metrics: [acc_teacher_forced]\n";
}

const std::string kNoCuda = kCudaUnavailable;  // GPUs hidden: the same error with or without CUDA built
// What every command says to --device '' (not the default, not cpu).
const char* kEmptyDevice = "--device must name a device (cpu";
const char* kUnknown = "unknown device 'gpu0' (devices here: cpu";

}  // namespace

RMT_CATALOGUE({
    // ---- rmt train: --device and the config's device: key ----------------------------------
    {"device", "train --device cuda", device_config,
     "train --config {dir}/c.yaml --out {dir}/run --device cuda", 1, kNoCuda},
    {"device", "train --device of an unknown name", device_config,
     "train --config {dir}/c.yaml --out {dir}/run --device gpu0", 1, kUnknown},
    {"device", "train: device: cuda in the config", device_config,
     "train --config {dir}/c.yaml --set device=cuda --out {dir}/run", 1, kNoCuda},
    {"device", "train --device that is not a name", device_config,
     "train --config {dir}/c.yaml --out {dir}/run --device GPU:0", 1,
     "invalid config: device = GPU:0: expected a device name (cpu"},
    {"device", "config: device given a list", device_config,
     "train --config {dir}/c.yaml --set device=[cpu] --out {dir}/run", 1,
     "--set device=[cpu]: invalid value (a list) for 'device': expected a device name"},
    // ---- rmt eval and rmt attn: --device, or the device the run was trained on ------------
    {"device", "eval --device cuda", device_run, "eval --run {dir}/run --device cuda", 1, kNoCuda},
    {"device", "eval --device of an unknown name", device_run, "eval --run {dir}/run --device gpu0", 1,
     kUnknown},
    {"device", "eval of a run trained on cuda", [](const std::string& d) { run_trained_on(d, "cuda"); },
     "eval --run {dir}/run", 1, kNoCuda},
    {"device", "eval of a run trained on cuda names the run", [](const std::string& d) { run_trained_on(d, "cuda"); },
     "eval --run {dir}/run", 1, "/run was trained on, from its config.yaml); --device chooses another"},
    {"device", "attn --device cuda", device_run, "attn --run {dir}/run --dump - --device cuda", 1, kNoCuda},
    {"device", "attn --device of an unknown name", device_run, "attn --run {dir}/run --dump - --device gpu0",
     1, kUnknown},
    {"device", "sample --device cuda", [](const std::string& d) { lm_run(d, "cpu"); },
     "sample {dir}/run --prompt ab --bytes 2 --device cuda", 1, kNoCuda},
    {"device", "sample of a run trained on cuda", [](const std::string& d) { lm_run(d, "cuda"); },
     "sample {dir}/run --prompt ab --bytes 2", 1, "/run was trained on, from its config.yaml); --device chooses another"},
    // ---- rmt bench ------------------------------------------------------------------------------
    {"device", "bench --device cuda", nullptr, "bench --tiny --reps 1 --warmup 0 --device cuda", 1, kNoCuda},
    {"device", "bench --device of an unknown name", nullptr, "bench --tiny --reps 1 --device gpu0", 1,
     kUnknown},
    {"device", "bench --peak-only --device cuda", nullptr, "bench --peak-only --gemm-size 64 --device cuda",
     1, kNoCuda},
    // ---- rmt sweep: refused before any dataset is generated or run started ---------------------
    {"device", "sweep --device cuda", [](const std::string& d) { device_sweep(d); }, "sweep {dir}/s.yaml --runs-dir {dir}/runs --device cuda",
     1, kNoCuda},
    {"device", "sweep --device of an unknown name", [](const std::string& d) { device_sweep(d); },
     "sweep {dir}/s.yaml --runs-dir {dir}/runs --device gpu0", 1, kUnknown},
    {"device", "sweep whose base sets device: cuda",
     [](const std::string& d) { device_sweep(d, "  device: cuda\n"); },
     "sweep {dir}/s.yaml --runs-dir {dir}/runs", 1, "(sweep s, run baseline-seg1-"},
    {"device", "sweep: a grid over devices and --device", [](const std::string& d) {
       std::ofstream(d + "/s.yaml")
           << "data: {task: copy, length: 5, symbols: 4, train: 40, val: 8, test: 8}\n"
           << "grid: {device: [cpu, cuda]}\n";
     },
     "sweep {dir}/s.yaml --runs-dir {dir}/runs --dry-run --device cpu", 1,
     "s.yaml: grid.device gives the runs their devices; --device cpu would give them all the same one"},
    // ---- rmt reproduce: refused before any dataset is generated or run started ----------------
    {"device", "reproduce --device cuda", device_manifest,
     "reproduce --manifest {dir}/m.yaml --runs-dir {dir}/runs --out {dir}/out --device cuda", 1, kNoCuda},
    {"device", "reproduce --device of an unknown name", device_manifest,
     "reproduce --manifest {dir}/m.yaml --runs-dir {dir}/runs --out {dir}/out --device gpu0", 1, kUnknown},
    {"device", "reproduce --device '' ", device_manifest,
     "reproduce --manifest {dir}/m.yaml --runs-dir {dir}/runs --out {dir}/out --device ''", 1, kEmptyDevice},
    // ---- --device '': refused alike by every command (cli_checks.h device_name) --------------
    {"device", "train --device ''", device_config, "train --config {dir}/c.yaml --out {dir}/run --device ''", 1,
     kEmptyDevice},
    {"device", "eval --device ''", device_run, "eval --run {dir}/run --device ''", 1, kEmptyDevice},
    {"device", "attn --device ''", device_run, "attn --run {dir}/run --dump - --device ''", 1, kEmptyDevice},
    {"device", "sample --device ''", [](const std::string& d) { lm_run(d, "cpu"); },
     "sample {dir}/run --prompt ab --bytes 2 --device ''", 1, kEmptyDevice},
    {"device", "sweep --device ''", [](const std::string& d) { device_sweep(d); },
     "sweep {dir}/s.yaml --runs-dir {dir}/runs --device ''", 1, kEmptyDevice},
    {"device", "bench --device ''", nullptr, "bench --tiny --reps 1 --warmup 0 --device ''", 1, kEmptyDevice},
    {"device", "step-dump --device ''", device_run,
     "step-dump --checkpoint {dir}/run/best.safetensors --input {dir}/c.yaml --target {dir}/c.yaml "
     "--segments 3 --answer-size 1 --out {dir}/sd --device ''", 1, kEmptyDevice},
    {"device", "sweep --device that is not a name", [](const std::string& d) { device_sweep(d); },
     "sweep {dir}/s.yaml --runs-dir {dir}/runs --device GPU", 1,
     "--device GPU: invalid value 'GPU' for 'device': expected a device name"},
});
