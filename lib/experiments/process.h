#pragma once
// Child processes of the experiment layer: a sweep's `rmt train` runs and `rmt generate`, and
// the tools rmt drives (gnuplot, nvidia-smi, nvidia-cuda-mps-control). Every fork/exec of lib/experiments is
// here, so how a child is started (its environment, its output, its death with the parent) is
// decided once.
#include <sys/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rmt {

// Variables set (a value) or removed (nullopt) in a child's environment, over the parent's.
using EnvChanges = std::map<std::string, std::optional<std::string>>;

// Starts `binary args...` with stdout and stderr appended to log, stdin from /dev/null and the
// parent's environment changed by env. The child dies with its parent (PR_SET_PDEATHSIG): a
// killed sweep takes its runs with it, so that no orphan keeps writing into a directory the
// next sweep resumes. Returns its pid.
pid_t spawn_logged(const std::string& binary, const std::vector<std::string>& args,
                   const std::filesystem::path& log, const EnvChanges& env = {});

// The exit status of a waited-for child: its code, or 128 + the signal that killed it.
int exit_code(int wait_status);

// Runs `binary args...` to completion with its output appended to log; returns exit_code.
int run_logged(const std::string& binary, const std::vector<std::string>& args,
               const std::filesystem::path& log, const EnvChanges& env = {});

struct ToolResult {
  bool started = false;  // false: the program could not be run (not found, not executable)
  int status = -1;       // exit_code, when started
  std::string output;    // stdout and stderr together
};
// Runs a tool found on PATH (`program` without a slash) or at a path, writes `input` to its
// stdin, collects its output and waits for it; one that runs past timeout_s is killed (status
// 128 + SIGKILL). Unlike spawn_logged, the tool may outlive rmt (a daemon it starts forks away).
// With stderr_file, the tool's stderr goes there and output holds its stdout alone (gnuplot's
// image on stdout, its messages apart).
ToolResult run_tool(const std::string& program, const std::vector<std::string>& args,
                    const std::string& input = "", const EnvChanges& env = {}, double timeout_s = 30,
                    const std::filesystem::path& stderr_file = {});

// The full path of `program` as a shell would find it on PATH ("" when it is not there); a
// program named with a slash is returned as it is when it is executable.
std::string find_program(const std::string& program);

}  // namespace rmt
