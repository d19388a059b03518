#pragma once
// Helpers for tests that run the rmt binary (RMT_BINARY, set by CMake) as a user would.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdio>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "lib/core/backend.h"
#include "lib/core/error.h"

// The message of the rmt::Error that `action` throws ("" if it throws nothing).
template <typename Action>
std::string error_of(Action action) {
  try {
    action();
  } catch (const rmt::Error& e) {
    return e.what();
  }
  return "";
}

struct Run {
  int status;          // exit status (-1 if killed by a signal)
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, capturing its stdout (redirect stderr in `cmd` to have it too) and
// its exit status.
inline Run shell_run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Runs `rmt ARGS`, capturing stdout+stderr (stdout only if stdout_only) and the exit status.
inline Run rmt_run(const std::string& args, bool stdout_only = false) {
  return shell_run(std::string(RMT_BINARY) + " " + args + (stdout_only ? " 2>/dev/null" : " 2>&1"));
}

// A fresh, empty temporary directory path for one test (group.PID/name): the process id keeps
// two test runs at once (two checkouts, make test beside a sanitizer build) out of each other's
// files.
inline std::string fresh_tmp(const std::string& group, const std::string& name) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / (group + "." + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  return dir.string();
}

// fresh_tmp, created.
inline std::filesystem::path fresh_dir(const std::string& group, const std::string& name) {
  std::filesystem::path dir = fresh_tmp(group, name);
  std::filesystem::create_directories(dir);
  return dir;
}

// A tiny sweep for the sweep and SLURM tests: copy of 4 symbols, a 1-layer model of width 8,
// 5 steps a run; 4 runs (two kinds x two segment counts).
inline const char* kTinySweep = R"(
data: {task: copy, length: 4, symbols: 4, train: 200, val: 16, test: 16, seed: 0}
base:
  model: {n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16, dropout: 0.0}
  train: {batch_size: 8, lr: 1.0e-3, schedule: constant, max_steps: 5, eval_every: 5, log_every: 5}
grid:
  model.kind: [baseline, rmt]
  segments: [1, 2]
derive:
  model.num_mem_tokens: segment_length / 2 + 1
)";

// What `--device cuda` says in the unit suite, which hides every GPU (tests/test_main.cpp): a build
// without the CUDA backend says so; a build with it (known_devices() names cuda) finds no device.
inline const std::string kCudaUnavailable =
    rmt::known_devices().find("cuda") != std::string::npos
        ? "device 'cuda': no CUDA device found ("
        : "device 'cuda': this rmt was built without the CUDA backend (devices here: cpu, cpu-guarded";

// Expects `rmt ARGS` to fail with a message containing `message`.
inline void expect_error(const std::string& args, const std::string& message) {
  Run r = rmt_run(args);
  CAPTURE(args);
  CAPTURE(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find(message) != std::string::npos);
}
