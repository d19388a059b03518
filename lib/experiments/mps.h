#pragma once
// NVIDIA's Multi-Process Service for a sweep's runs on one GPU (`rmt sweep/reproduce --mps`).
//
// One run of the paper's models uses well under 1% of a GPU, so a sweep on a GPU runs many runs
// at once, each an `rmt train` process. Without MPS the GPU time-slices between processes (their
// kernels take turns); with an MPS daemon their kernels run side by side (docs/cuda.md: 6.7x the
// steps of 16 processes on an H200). A CUDA program uses MPS when it finds a control daemon in
// its CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps), and runs without it otherwise.
//
//   auto (default)  use a daemon that is running; else start one for this sweep and stop it
//                   after, but only where no other process is on the GPU: an MPS server runs
//                   under one user and can lock other users' processes out of a shared GPU
//   on              the same, starting one even beside other processes; fail if none can start
//   off             never: the runs are pointed at a pipe directory without a daemon
//
// A daemon this sweep starts lives in a private pipe directory named after the sweep's
// directory, so a sweep killed with SIGKILL leaves it there and the next sweep of that directory
// adopts it (and stops it when done) instead of leaking a second one.
#include <string>

#include "lib/experiments/process.h"

namespace rmt {

enum class MpsMode { automatic, on, off };
// "auto", "on", "off"; anything else fails naming the choices.
MpsMode parse_mps_mode(const std::string& text);
const char* mps_mode_name(MpsMode mode);

// Whether runs on this device are GPU processes that MPS can put side by side.
inline bool device_is_gpu(const std::string& device) { return device == "cuda"; }

// The programs it drives: found on PATH unless given with a path (tests use stand-ins).
struct MpsTools {
  std::string control = "nvidia-cuda-mps-control", smi = "nvidia-smi";
};

// The decision for one sweep, and the daemon it started or adopted (stopped by the destructor).
class MpsSession {
 public:
  // `owner` names the sweep (its directory) for the private pipe directory. Fails only for
  // MpsMode::on when no daemon can be used or started.
  MpsSession(MpsMode mode, const std::string& owner, const MpsTools& tools = {});
  ~MpsSession();
  MpsSession(const MpsSession&) = delete;
  MpsSession& operator=(const MpsSession&) = delete;

  bool active() const { return active_; }
  // One line for the user: "with MPS: ..." or "without MPS: <why>".
  const std::string& line() const { return line_; }
  // What each run's environment needs (the pipe and log directories of the daemon it uses).
  const EnvChanges& child_env() const { return child_env_; }
  // The pid of the daemon in use (0: none or unknown).
  long daemon_pid() const { return daemon_pid_; }

 private:
  bool start_own(MpsMode mode, const std::string& why_shared);
  void stop_own() noexcept;

  MpsTools tools_;
  std::string private_dir_;
  bool active_ = false, owned_ = false;
  long daemon_pid_ = 0;
  std::string line_;
  EnvChanges child_env_;
};

// The private pipe directory of a daemon started for `owner` (a sweep's directory): short, since a
// Unix socket's path (DIR/control) is limited to 108 bytes.
std::string mps_private_pipe_dir(const std::string& owner);

// The control daemon answering in pipe directory `dir` (its pid file names a live process): its
// pid, or 0.
long mps_daemon_pid(const std::string& dir);

// The most processes one MPS server serves on a GPU of compute capability 7.0 or newer.
inline constexpr int kMpsMaxClients = 48;

}  // namespace rmt
