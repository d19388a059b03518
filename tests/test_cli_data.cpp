#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "lib/files/io.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

static std::string cli_tmp(const std::string& name) { return fresh_tmp("rmt_test_cli_data", name); }


TEST_CASE("rmt generate, data check, data show") {
  std::string dir = cli_tmp("ok");
  Run g = rmt_run("generate retrieval --out " + dir + " --train 200 --val 20 --test 30 --seed 3");
  CHECK_MESSAGE(g.status == 0, g.output);
  CHECK(g.output.find("train 200, val 20, test 30") != std::string::npos);
  Run c = rmt_run("data check " + dir);
  CHECK_MESSAGE(c.status == 0, c.output);
  CHECK(c.output.find("retrieval test: OK 30 rows") != std::string::npos);
  Run s = rmt_run("data show " + dir + " --split val -n 2");
  CHECK(s.status == 0);
  CHECK(s.output.find("#1") != std::string::npos);
  CHECK(s.output.find("y: ? | ") != std::string::npos);
  // Existing files are kept unless --force.
  expect_error("generate retrieval --out " + dir + " --train 200 --val 20 --test 30", "--force");
  CHECK(rmt_run("generate retrieval --out " + dir + " --train 10 --val 2 --test 3 --force").status == 0);
  // A corrupted file makes check fail with the file named.
  std::string y = (fs::path(dir) / "retrieval_train_y.npy").string();
  std::string bytes = rmt::read_file(y);
  bytes[bytes.size() - 1] ^= 1;
  rmt::write_file_atomic(y, bytes);
  Run bad = rmt_run("data check " + dir);
  CHECK(bad.status == 1);
  CHECK(bad.output.find("retrieval_train_y.npy: sha256 differs") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("rmt generate rejects bad options before writing anything") {
  std::string dir = cli_tmp("bad");
  expect_error("generate nosuchtask --out " + dir, "unknown task 'nosuchtask'");
  expect_error("generate copy --length 0 --out " + dir, "--length must be from 1 to 100000 (got 0)");
  expect_error("generate retrieval --pairs 11 --out " + dir, "at most 10");
  expect_error("generate copy --pairs 3 --out " + dir, "--pairs is not an option of task copy");
  expect_error("generate sqeq --length 3 --out " + dir, "--length is not an option of task sqeq");
  expect_error("generate copy120 --length 3 --out " + dir, "copy120 fixes length 120");
  expect_error("generate copy --length 3 --symbols 2 --train 5 --val 2 --test 2 --out " + dir,
               "copy has only 8 distinct samples");
  expect_error("generate retrieval --pairs 1 --train 300 --out " + dir, "only 260 distinct samples");
  CHECK(!fs::exists(dir));  // nothing written for any of these
  // Unwritable: a path below a regular file.
  std::string file = cli_tmp("plainfile");
  fs::create_directories(fs::path(file).parent_path());
  rmt::write_file_atomic(file, "x");
  expect_error("generate copy --train 5 --val 1 --test 1 --out " + file + "/sub", file + " is not a directory");
  expect_error("generate copy --train 5 --val 1 --test 1 --out " + file, "is not a directory");
  expect_error("data check " + cli_tmp("missing"), "does not exist");
  Run help = rmt_run("generate --help");
  CHECK(help.status == 0);
  CHECK(help.output.find("--pairs") != std::string::npos);
  fs::remove_all(file);
}

TEST_CASE("generation does not depend on the thread count") {
  std::string a = cli_tmp("omp1"), b = cli_tmp("omp2");
  const std::string opts = " --train 300 --val 30 --test 30 --seed 9";
  CHECK(std::system(("OMP_NUM_THREADS=1 " + std::string(RMT_BINARY) + " generate sqeq --out " + a + opts + " >/dev/null").c_str()) == 0);
  CHECK(std::system(("OMP_NUM_THREADS=2 " + std::string(RMT_BINARY) + " generate sqeq --out " + b + opts + " >/dev/null").c_str()) == 0);
  for (const char* f : {"sqeq_train_X.npy", "sqeq_val_y.npy", "sqeq_test_X.npy", "meta.yaml"})
    CHECK(rmt::read_file(fs::path(a) / f) == rmt::read_file(fs::path(b) / f));
  fs::remove_all(a);
  fs::remove_all(b);
}
