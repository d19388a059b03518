// A run read back on its own dataset (lib/run/run_data.h): `rmt eval` and `rmt attn` compare the
// dataset with the fingerprint the run recorded. The refusals are in the catalogue
// (catalogue_runs.cpp, catalogue_attn.cpp, catalogue_lm.cpp); here what still works. Also what
// a run records of the machine and build that made it (lib/core/provenance.h), and a resume
// without --config.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tasks/family.h"
#include "lib/core/backend.h"
#include "lib/core/provenance.h"
#include "lib/files/io.h"
#include "lib/run/run_data.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {

void copy_data(const std::string& out, uint64_t seed) {
  rmt::GenerateRequest r;
  r.task = rmt::resolve_task("copy", 5, 4);
  r.sizes = {40, 8, 8};
  r.seed = seed;
  r.out_dir = out;
  r.force = true;
  rmt::generate_dataset(r);
}

// {dir}/d and {dir}/run: a 4-step run on it.
std::string trained_run(const std::string& name) {
  const std::string dir = fresh_dir("rmt_run_data", name).string();
  copy_data(dir + "/d", 1);
  std::ofstream(dir + "/c.yaml")
      << "data: " << dir << "/d\nsegments: 3\n"
      << "model: {kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, d_inner: 16, dropout: 0.0, "
         "num_mem_tokens: 2}\n"
      << "train: {batch_size: 4, lr: 1.0e-3, max_steps: 4, eval_every: 2, log_every: 1, seed: 1, threads: 1}\n";
  Run r = rmt_run("train --config " + dir + "/c.yaml --out " + dir + "/run");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  return dir;
}

}  // namespace

TEST_CASE("run data: the recorded fingerprint is the dataset's, from results.json or the state") {
  const std::string dir = trained_run("recorded");
  const std::string now = rmt::dataset_fingerprint(dir + "/d");
  CHECK(rmt::recorded_dataset_fingerprint(dir + "/run") == now);
  fs::remove(dir + "/run/results.json");
  CHECK(rmt::recorded_dataset_fingerprint(dir + "/run") == now);  // state.safetensors' metadata
  fs::remove(dir + "/run/state.safetensors");
  CHECK(rmt::recorded_dataset_fingerprint(dir + "/run") == "");
}

TEST_CASE("run data: eval on the unchanged dataset, a changed one with --allow-changed-data, an older run") {
  const std::string dir = trained_run("eval");
  Run same = rmt_run("eval --run " + dir + "/run", true);
  CHECK(same.status == 0);
  CHECK(same.output.find("\"acc_teacher_forced\"") != std::string::npos);

  const std::string before = rmt::dataset_fingerprint(dir + "/d");
  copy_data(dir + "/d", 2);
  const std::string after = rmt::dataset_fingerprint(dir + "/d");
  REQUIRE(before != after);
  Run refused = rmt_run("eval --run " + dir + "/run");
  CHECK(refused.status == 1);
  CHECK(refused.output.find("its fingerprint is now " + after + ", the run recorded " + before) != std::string::npos);
  Run allowed = rmt_run("eval --run " + dir + "/run --allow-changed-data");
  CHECK(allowed.status == 0);
  CHECK(allowed.output.find("warning: dataset " + dir + "/d changed since run") != std::string::npos);
  CHECK(allowed.output.find("\"acc_teacher_forced\"") != std::string::npos);
  // --data evaluates elsewhere: the run's own dataset is not compared.
  copy_data(dir + "/d10", 3);
  CHECK(rmt_run("eval --run " + dir + "/run --data " + dir + "/d10").status == 0);

  // A run that recorded no fingerprint (an older rmt) keeps working, with a note.
  fs::remove(dir + "/run/results.json");
  fs::remove(dir + "/run/state.safetensors");
  Run older = rmt_run("eval --run " + dir + "/run");
  CHECK(older.status == 0);
  CHECK(older.output.find("records no dataset fingerprint") != std::string::npos);
}

TEST_CASE("train --resume without --config continues the run with its saved config.yaml") {
  const std::string dir = fresh_dir("rmt_run_data", "resume").string();
  copy_data(dir + "/d", 1);
  std::ofstream(dir + "/c.yaml")
      << "data: " << dir << "/d\nsegments: 3\n"
      << "model: {kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, d_inner: 16, dropout: 0.0, "
         "num_mem_tokens: 2}\n"
      << "train: {batch_size: 4, lr: 1.0e-3, max_steps: 4, eval_every: 2, log_every: 1, seed: 1, threads: 1}\n";
  REQUIRE(rmt_run("train --config " + dir + "/c.yaml --out " + dir + "/run --abort-after-step 3").status == 86);
  Run r = rmt_run("train --out " + dir + "/run --resume");
  CHECK_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("resuming with the run's saved config " + dir + "/run/config.yaml") != std::string::npos);
  CHECK(r.output.find("\"steps\": 4") != std::string::npos);
}

TEST_CASE("provenance: results.json and rmt --version name the CPU, the build and the GEMM library") {
  const std::string dir = trained_run("provenance");
  const auto results = nlohmann::json::parse(rmt::read_file(dir + "/run/results.json"));
  Run v = rmt_run("--version", true);
  REQUIRE(v.status == 0);
  for (const auto& [key, value] : rmt::provenance()) {
    CAPTURE(key);
    CHECK(!value.empty());
    REQUIRE(results.contains(key));
    CHECK(results[key] == value);
    CHECK(v.output.find(key + ": " + value + "\n") != std::string::npos);
  }
  CHECK(results["cpu_model"] == rmt::cpu_model_name());
  CHECK(results["build_type"] != "unknown");  // CMake passes it (CMakeLists.txt)
  CHECK(results["gemm"] == rmt::cpu_gemm_library());
  // The vector extensions this build compiled in: -march=native on an x86-64 machine has at least SSE2.
#if defined(__x86_64__)
  CHECK(results["vector_extensions"].get<std::string>().find("sse2") != std::string::npos);
#endif
  const std::string flags = results["build_flags"];
  CHECK((flags.find("-march=native") != std::string::npos) == (results["native_build"].get<std::string>().rfind("yes", 0) == 0));
}
