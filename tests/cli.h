#pragma once
// Helpers for tests that run the rmt binary (RMT_BINARY, set by CMake) as a user would.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "lib/error.h"

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

// Runs `rmt ARGS`, capturing stdout+stderr (stdout only if stdout_only) and the exit status.
inline Run rmt_run(const std::string& args, bool stdout_only = false) {
  std::string cmd = std::string(RMT_BINARY) + " " + args + (stdout_only ? " 2>/dev/null" : " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A fresh, empty temporary directory path for one test (group/name).
inline std::string fresh_tmp(const std::string& group, const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / group / name;
  std::filesystem::remove_all(dir);
  return dir.string();
}

// Expects `rmt ARGS` to fail with a message containing `message`.
inline void expect_error(const std::string& args, const std::string& message) {
  Run r = rmt_run(args);
  CAPTURE(args);
  CAPTURE(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find(message) != std::string::npos);
}
