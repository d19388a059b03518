#pragma once
// The kill tests (tests/test_kill_train.cpp, tests/test_kill_sweep.cpp): `rmt ARGS` started with
// a kill point (the RMT_TEST_KILL_AT_WRITE hook of lib/files/io.h), the processes on the machine,
// and a run directory compared with an uninterrupted run's: every file bit-identical except the
// fields that measure time.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/files/io.h"
#include "lib/files/safetensors.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---- running rmt --------------------------------------------------------------------------------

// Starts `rmt ARGS` with stdout and stderr appended to `log`; with kill_at set, the process
// SIGKILLs itself at that write point (lib/files/io.h: "N" or "N:PATH_TEXT").
inline pid_t start_rmt(const std::vector<std::string>& args, const fs::path& log, const std::string& kill_at = "") {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (!kill_at.empty()) setenv(rmt::kKillAtWriteEnv, kill_at.c_str(), 1);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    std::vector<char*> argv;
    std::vector<std::string> copy = args;
    argv.push_back(const_cast<char*>(RMT_BINARY));
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(RMT_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

struct Outcome {
  bool killed = false;  // by SIGKILL
  int status = -1;      // exit status otherwise
};

inline Outcome wait_rmt(pid_t pid) {
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
  Outcome o;
  if (WIFSIGNALED(ws)) o.killed = WTERMSIG(ws) == SIGKILL;
  else if (WIFEXITED(ws)) o.status = WEXITSTATUS(ws);
  return o;
}

inline Outcome run_rmt(const std::vector<std::string>& args, const fs::path& log, const std::string& kill_at = "") {
  return wait_rmt(start_rmt(args, log, kill_at));
}

inline std::string text_of(const fs::path& path) { return fs::exists(path) ? rmt::read_file(path) : ""; }

// Files named like write_file_atomic's temp files (NAME.tmp.PID) anywhere under dir.
inline std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// Waits until no process has `text` in its command line (the runs of a killed sweep die with it).
inline bool no_process_mentions(const std::string& text) {
  for (int attempt = 0; attempt < 250; ++attempt) {
    bool found = false;
    for (const auto& e : fs::directory_iterator("/proc")) {
      std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream in(e.path() / "cmdline", std::ios::binary);
      std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (cmdline.find(text) != std::string::npos) found = true;
    }
    if (!found) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// This process's own scratch directory: other test processes on the machine (another worktree's
// suite) must not share it, and /proc is searched for its path.
inline fs::path kill_tmp(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / fmt::format("rmt_test_kill.{}", getpid()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The pids of processes whose command line holds all of `words`.
inline std::vector<pid_t> processes_with(const std::vector<std::string>& words) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bool all = !cmdline.empty();
    for (const auto& w : words) all = all && cmdline.find(w) != std::string::npos;
    if (all) out.push_back(pid_t(std::stol(name)));
  }
  return out;
}

// A process's state letter from /proc/<pid>/stat ('R' running, 'T' stopped, 'Z' exited...), or
// 0 once it is gone.
inline char process_state(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(") ");  // the command name in parentheses may hold spaces
  return paren == std::string::npos || paren + 2 >= stat.size() ? 0 : stat[paren + 2];
}

// A fixed-seed generator for choosing kill points (the same choice every time).
struct Lcg {
  uint64_t state;
  uint64_t below(uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  }
};

// ---- what must be identical ---------------------------------------------------------------------

// metrics.jsonl without tokens_per_s (timing); a torn line shows up as "<torn>".
inline std::string metrics_without_timing(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) return out + "<torn, no newline>\n";
    json j = json::parse(text.substr(start, end - start), nullptr, false);
    if (j.is_discarded()) {
      out += "<torn>\n";
    } else {
      j.erase("tokens_per_s");
      out += j.dump() + "\n";
    }
    start = end + 1;
  }
  return out;
}

// state.safetensors without its wall_time_s metadata: tensors and the other counters.
inline std::string state_without_timing(const fs::path& path) {
  rmt::SafetensorsFile f = rmt::load_safetensors(path.string());
  std::string out;
  for (const auto& [key, value] : f.metadata)
    if (key != "wall_time_s") out += key + "=" + value + "\n";
  for (const auto& [name, t] : f.tensors) {
    out += name + "\n";
    out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  }
  return out;
}

// A run directory's files as they must match: bytes, except the timing fields.
inline std::map<std::string, std::string> run_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "train.log" || name == "sweep_error.txt") continue;  // a sweep's own notes
    std::string bytes = rmt::read_file(e.path());
    if (name == "metrics.jsonl") {
      bytes = metrics_without_timing(bytes);
    } else if (name == "results.json") {
      json j = json::parse(bytes, nullptr, false);
      if (!j.is_discarded()) {
        j.erase("wall_time_s");
        j.erase("peak_rss_mb");  // measured, varies by a few pages between runs
      }
      bytes = j.dump();
    } else if (name == "state.safetensors") {
      bytes = state_without_timing(e.path());
    }
    files[name] = bytes;
  }
  return files;
}

// Checks that run directory `got` holds exactly the files of `want`, with equal contents.
inline void check_same_run(const fs::path& want, const fs::path& got, const std::string& context) {
  CAPTURE(context);
  auto a = run_files(want), b = run_files(got);
  std::set<std::string> names;
  for (const auto& [k, v] : a) names.insert(k);
  for (const auto& [k, v] : b) names.insert(k);
  for (const auto& name : names) {
    CAPTURE(name);
    CHECK_MESSAGE(a.count(name), "unexpected file " << (got / name).string());
    CHECK_MESSAGE(b.count(name), "missing file " << (got / name).string());
    if (a.count(name) && b.count(name)) {
      if (name == "metrics.jsonl") CHECK(a[name] == b[name]);  // prints both on failure
      else CHECK_MESSAGE(a[name] == b[name], "differs from the uninterrupted run: " << name);
    }
  }
}
