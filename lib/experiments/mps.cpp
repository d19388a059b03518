// MPS for a sweep's GPU runs (mps.h).
#include "lib/experiments/mps.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;

MpsMode parse_mps_mode(const std::string& text) {
  if (text == "auto") return MpsMode::automatic;
  if (text == "on") return MpsMode::on;
  if (text == "off") return MpsMode::off;
  fail("--mps {}: expected auto, on or off", text);
}

const char* mps_mode_name(MpsMode mode) {
  switch (mode) {
    case MpsMode::on: return "on";
    case MpsMode::off: return "off";
    default: return "auto";
  }
}

static bool process_alive(long pid) { return pid > 0 && (kill(pid_t(pid), 0) == 0 || errno == EPERM); }

long mps_daemon_pid(const std::string& dir) {
  std::error_code ec;
  const fs::path file = fs::path(dir) / "nvidia-cuda-mps-control.pid";
  if (!fs::is_regular_file(file, ec)) return 0;
  std::string text;
  try {
    text = read_file(file);
  } catch (const Error&) {
    return 0;
  }
  char* end = nullptr;
  const long pid = std::strtol(text.c_str(), &end, 10);
  return end != text.c_str() && process_alive(pid) ? pid : 0;
}

// The pipe directory a CUDA program of this environment looks in.
static std::string default_pipe_dir() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  return dir && *dir ? dir : "/tmp/nvidia-mps";
}

// The compute processes on the GPU(s) this process would use, but this one ("pid name" each),
// or why they cannot be known.
struct GpuProcesses {
  bool known = false;
  std::string why_unknown;
  std::vector<std::string> others;
};
static GpuProcesses gpu_processes(const MpsTools& tools) {
  GpuProcesses g;
  std::vector<std::string> args = {"--query-compute-apps=pid,process_name", "--format=csv,noheader"};
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible && *visible)
    args.insert(args.begin(), {"-i", visible});
  const ToolResult r = run_tool(tools.smi, args);
  if (!r.started) {
    g.why_unknown = fmt::format("{} is not on PATH", tools.smi);
    return g;
  }
  std::istringstream in(r.output);
  std::string line, last;
  std::vector<std::string> others;
  for (; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    last = line;
    char* end = nullptr;
    const long pid = std::strtol(line.c_str(), &end, 10);
    if (end == line.c_str()) continue;  // not a process row ("No running processes found")
    if (pid == long(getpid())) continue;
    std::string name = *end == ',' ? std::string(end + 1) : std::string();
    name.erase(0, name.find_first_not_of(' '));
    others.push_back(fmt::format("pid {} {}", pid, name));
  }
  if (r.status != 0) {
    g.why_unknown = fmt::format("{} failed (status {}: {})", tools.smi, r.status, last);
    return g;
  }
  g.known = true;
  g.others = others;
  return g;
}

std::string mps_private_pipe_dir(const std::string& owner) {
  std::error_code ec;
  const std::string absolute = fs::absolute(owner, ec).lexically_normal().string();
  return fmt::format("/tmp/rmt-mps.{}.{}", getuid(), sha256_hex(absolute).substr(0, 12));
}

static EnvChanges pipe_env(const std::string& dir) {
  return {{"CUDA_MPS_PIPE_DIRECTORY", dir}, {"CUDA_MPS_LOG_DIRECTORY", dir + "/log"}};
}

MpsSession::MpsSession(MpsMode mode, const std::string& owner, const MpsTools& tools)
    : tools_(tools), private_dir_(mps_private_pipe_dir(owner)) {
  if (mode == MpsMode::off) {
    // A directory that holds no daemon: a running one is not found, so not used.
    child_env_ = {{"CUDA_MPS_PIPE_DIRECTORY", private_dir_ + ".off"}};
    line_ = "without MPS: --mps off (the runs' kernels take turns on the GPU)";
    return;
  }
  // 1. A daemon a killed sweep of this directory left: adopt it, and stop it when done.
  if (long pid = mps_daemon_pid(private_dir_)) {
    active_ = owned_ = true;
    daemon_pid_ = pid;
    child_env_ = pipe_env(private_dir_);
    line_ = fmt::format("with MPS: the daemon an earlier sweep of this directory left (pid {}, pipes in {}); "
                        "stopped when this sweep ends", pid, private_dir_);
    return;
  }
  // 2. A daemon running where CUDA programs look by default: use it as it is.
  const std::string shared = default_pipe_dir();
  if (long pid = mps_daemon_pid(shared)) {
    active_ = true;
    daemon_pid_ = pid;
    line_ = fmt::format("with MPS: the daemon running in {} (pid {})", shared, pid);
    return;
  }
  // 3. None: start one, unless the GPU is shared (auto).
  if (find_program(tools_.control).empty()) {
    if (mode == MpsMode::on)
      fail("--mps on: no MPS daemon is running and {} is not on PATH to start one (it comes with the NVIDIA "
           "driver's utilities)", tools_.control);
    line_ = fmt::format("without MPS: no daemon is running and {} is not on PATH to start one", tools_.control);
    return;
  }
  const GpuProcesses gpu = gpu_processes(tools_);
  std::string why_shared;
  if (!gpu.known)
    why_shared = fmt::format("whether another process uses the GPU is unknown ({})", gpu.why_unknown);
  else if (!gpu.others.empty())
    why_shared = fmt::format("{} other process{} on the GPU ({}{})", gpu.others.size(),
                             gpu.others.size() == 1 ? " is" : "es are", gpu.others[0],
                             gpu.others.size() > 1 ? ", ..." : "");
  if (!why_shared.empty() && mode == MpsMode::automatic) {
    line_ = fmt::format("without MPS: {}, and an MPS server of this user could lock them out; `--mps on` "
                        "starts one anyway", why_shared);
    return;
  }
  start_own(mode, why_shared);
}

bool MpsSession::start_own(MpsMode mode, const std::string& why_shared) {
  std::error_code ec;
  fs::create_directories(fs::path(private_dir_) / "log", ec);
  if (!ec) fs::permissions(private_dir_, fs::perms::owner_all, ec);
  std::string why;
  if (ec) {
    why = fmt::format("cannot make its pipe directory {}: {}", private_dir_, ec.message());
  } else {
    const ToolResult r = run_tool(tools_.control, {"-d"}, "", pipe_env(private_dir_));
    if (r.status != 0) {
      std::string out = r.output;
      while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
      why = fmt::format("`{} -d` failed (status {}{}{})", tools_.control, r.status, out.empty() ? "" : ": ",
                        out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1));
    } else {
      // The daemon forks away; it writes its pid file once it listens.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!(daemon_pid_ = mps_daemon_pid(private_dir_)) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!daemon_pid_) why = fmt::format("`{} -d` wrote no pid file in {} within 10 s", tools_.control, private_dir_);
    }
  }
  if (!why.empty()) {
    fs::remove_all(private_dir_, ec);
    if (mode == MpsMode::on) fail("--mps on: cannot start an MPS daemon: {}", why);
    line_ = fmt::format("without MPS: cannot start a daemon: {}", why);
    return false;
  }
  active_ = owned_ = true;
  child_env_ = pipe_env(private_dir_);
  line_ = fmt::format("with MPS: started a daemon for this sweep (pid {}, pipes in {}); stopped when it ends{}",
                      daemon_pid_, private_dir_,
                      why_shared.empty() ? "" : fmt::format(" (--mps on, though {})", why_shared));
  return true;
}

void MpsSession::stop_own() noexcept {
  try {
    run_tool(tools_.control, {}, "quit\n", pipe_env(private_dir_));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    // Gone when its pid file is, or names a dead process.
    while (mps_daemon_pid(private_dir_) != 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (mps_daemon_pid(private_dir_) == 0) {
      std::error_code ec;
      fs::remove_all(private_dir_, ec);
    }
  } catch (...) {
    // A daemon that would not stop stays in its private directory; the next sweep adopts it.
  }
}

MpsSession::~MpsSession() {
  if (owned_) stop_own();
}

}  // namespace rmt
