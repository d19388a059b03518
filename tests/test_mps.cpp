// MPS for a sweep's GPU runs (lib/experiments/mps.h) with stand-ins for nvidia-cuda-mps-control
// and nvidia-smi (no GPU needed), and the process runner the sweep starts its runs with.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "lib/core/error.h"
#include "lib/experiments/mps.h"
#include "lib/experiments/process.h"
#include "lib/experiments/sweep.h"
#include "lib/files/io.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {

// Stand-in tools in a fresh directory: the control program logs each call ("-d" or its stdin)
// and, for -d, starts a "daemon" (a sleep) whose pid file goes into CUDA_MPS_PIPE_DIRECTORY, as
// the real one does; "quit" on its stdin kills it and removes the pid file. nvidia-smi prints
// the file smi_output and exits with smi_status.
struct StandIns {
  fs::path dir;
  rmt::MpsTools tools;
  explicit StandIns(const std::string& name) : dir(fresh_dir("rmt_test_mps", name)) {
    const std::string log = (dir / "calls.log").string();
    rmt::write_file_atomic(dir / "control", "#!/bin/sh\n"
        "if [ \"$1\" = -d ]; then\n"
        "  echo \"-d $CUDA_MPS_PIPE_DIRECTORY\" >> " + log + "\n"
        "  sleep 300 </dev/null >/dev/null 2>&1 &\n"
        "  echo $! > \"$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid\"\n"
        "  exit 0\n"
        "fi\n"
        "read cmd\n"
        "echo \"$cmd $CUDA_MPS_PIPE_DIRECTORY\" >> " + log + "\n"
        "if [ \"$cmd\" = quit ]; then\n"
        "  kill $(cat \"$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid\")\n"
        "  rm -f \"$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid\"\n"
        "fi\n");
    rmt::write_file_atomic(dir / "smi", "#!/bin/sh\necho \"smi $*\" >> " + log + "\n"
        "cat " + (dir / "smi_output").string() + " 2>/dev/null\n"
        "exit $(cat " + (dir / "smi_status").string() + " 2>/dev/null || echo 0)\n");
    fs::permissions(dir / "control", fs::perms::owner_all);
    fs::permissions(dir / "smi", fs::perms::owner_all);
    tools.control = (dir / "control").string();
    tools.smi = (dir / "smi").string();
  }
  std::string calls() const { return fs::exists(dir / "calls.log") ? rmt::read_file(dir / "calls.log") : ""; }
  std::string owner(const std::string& name) const { return (dir / name).string(); }
};

// Sets an environment variable for one scope, restoring the old value.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old) setenv(name.c_str(), old->c_str(), 1);
    else unsetenv(name.c_str());
  }
};

bool alive(long pid) { return pid > 0 && kill(pid_t(pid), 0) == 0; }

}  // namespace

TEST_CASE("mps: auto starts a daemon for the sweep where the GPU has no other process, and stops it after") {
  StandIns s("auto_starts");
  ScopedEnv shared("CUDA_MPS_PIPE_DIRECTORY", (s.dir / "no-daemon-here").string());
  long pid = 0;
  std::string pipe_dir;
  {
    rmt::MpsSession mps(rmt::MpsMode::automatic, s.owner("sweep"), s.tools);
    CHECK(mps.active());
    CHECK(mps.line().find("with MPS: started a daemon for this sweep") == 0);
    pid = mps.daemon_pid();
    CHECK(alive(pid));
    pipe_dir = rmt::mps_private_pipe_dir(s.owner("sweep"));
    REQUIRE(mps.child_env().count("CUDA_MPS_PIPE_DIRECTORY") == 1);
    CHECK(*mps.child_env().at("CUDA_MPS_PIPE_DIRECTORY") == pipe_dir);
    CHECK(*mps.child_env().at("CUDA_MPS_LOG_DIRECTORY") == pipe_dir + "/log");
    CHECK(rmt::mps_daemon_pid(pipe_dir) == pid);
    CHECK(s.calls().find("smi --query-compute-apps=pid,process_name --format=csv,noheader") != std::string::npos);
    CHECK(s.calls().find("-d " + pipe_dir) != std::string::npos);
    CHECK(s.calls().find("quit") == std::string::npos);
  }
  CHECK(s.calls().find("quit " + pipe_dir) != std::string::npos);
  CHECK(!fs::exists(pipe_dir));
  // The stand-in's sleep was killed; give the kernel a moment to reap it (it is not our child).
  for (int i = 0; i < 100 && alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(rmt::mps_daemon_pid(pipe_dir) == 0);
}

TEST_CASE("mps: auto leaves a shared GPU alone and says why; on starts a daemon anyway") {
  StandIns s("shared_gpu");
  ScopedEnv shared("CUDA_MPS_PIPE_DIRECTORY", (s.dir / "no-daemon-here").string());
  rmt::write_file_atomic(s.dir / "smi_output", "4242, python3\n");
  {
    rmt::MpsSession mps(rmt::MpsMode::automatic, s.owner("sweep"), s.tools);
    CHECK(!mps.active());
    CHECK(mps.line() == "without MPS: 1 other process is on the GPU (pid 4242 python3), and an MPS server of this "
                        "user could lock them out; `--mps on` starts one anyway");
    CHECK(mps.child_env().empty());
  }
  CHECK(s.calls().find("-d") == std::string::npos);
  {
    rmt::MpsSession mps(rmt::MpsMode::on, s.owner("sweep"), s.tools);
    CHECK(mps.active());
    CHECK(mps.line().find("(--mps on, though 1 other process is on the GPU (pid 4242 python3))") != std::string::npos);
  }
  CHECK(s.calls().find("quit") != std::string::npos);
  // This process itself on the GPU is no other process.
  rmt::write_file_atomic(s.dir / "smi_output", std::to_string(getpid()) + ", rmt\n");
  rmt::MpsSession mine(rmt::MpsMode::automatic, s.owner("sweep"), s.tools);
  CHECK(mine.active());
  // nvidia-smi failing: whether the GPU is shared is unknown, so auto does not start one.
  rmt::write_file_atomic(s.dir / "smi_status", "9\n");
  rmt::write_file_atomic(s.dir / "smi_output", "NVIDIA-SMI has failed\n");
  rmt::MpsSession unknown(rmt::MpsMode::automatic, s.owner("other"), s.tools);
  CHECK(!unknown.active());
  CHECK(unknown.line().find("whether another process uses the GPU is unknown") != std::string::npos);
  CHECK(unknown.line().find("status 9: NVIDIA-SMI has failed") != std::string::npos);
}

TEST_CASE("mps: a running daemon is used as it is; one a killed sweep left is adopted and stopped") {
  StandIns s("running");
  // A daemon where CUDA programs look: its pid file names a live process (this one).
  fs::path shared_dir = s.dir / "shared";
  fs::create_directories(shared_dir);
  rmt::write_file_atomic(shared_dir / "nvidia-cuda-mps-control.pid", std::to_string(getpid()) + "\n");
  {
    ScopedEnv shared("CUDA_MPS_PIPE_DIRECTORY", shared_dir.string());
    rmt::MpsSession mps(rmt::MpsMode::automatic, s.owner("sweep"), s.tools);
    CHECK(mps.active());
    CHECK(mps.line() == "with MPS: the daemon running in " + shared_dir.string() + " (pid " +
                            std::to_string(getpid()) + ")");
    CHECK(mps.child_env().empty());  // the runs find it as this process would
  }
  CHECK(s.calls().empty());  // neither started nor stopped
  // A stale pid file (a dead process) is no daemon.
  rmt::write_file_atomic(shared_dir / "nvidia-cuda-mps-control.pid", "999999999\n");
  CHECK(rmt::mps_daemon_pid(shared_dir.string()) == 0);

  // A sweep killed with SIGKILL left its daemon in its private directory: the next sweep of that
  // directory uses it and stops it when done.
  ScopedEnv shared("CUDA_MPS_PIPE_DIRECTORY", (s.dir / "no-daemon-here").string());
  const std::string pipe_dir = rmt::mps_private_pipe_dir(s.owner("sweep"));
  fs::create_directories(pipe_dir);
  REQUIRE(rmt::run_tool(s.tools.control, {"-d"}, "", {{"CUDA_MPS_PIPE_DIRECTORY", pipe_dir}}).status == 0);
  const long left = rmt::mps_daemon_pid(pipe_dir);
  REQUIRE(left > 0);
  {
    rmt::MpsSession mps(rmt::MpsMode::automatic, s.owner("sweep"), s.tools);
    CHECK(mps.active());
    CHECK(mps.daemon_pid() == left);
    CHECK(mps.line().find("with MPS: the daemon an earlier sweep of this directory left (pid " +
                          std::to_string(left) + ", pipes in " + pipe_dir + ")") == 0);
  }
  CHECK(s.calls().find("quit " + pipe_dir) != std::string::npos);
  CHECK(rmt::mps_daemon_pid(pipe_dir) == 0);
}

TEST_CASE("mps: off points the runs at a pipe directory without a daemon; missing tools") {
  StandIns s("off");
  rmt::MpsSession off(rmt::MpsMode::off, s.owner("sweep"), s.tools);
  CHECK(!off.active());
  CHECK(off.line().find("without MPS: --mps off") == 0);
  REQUIRE(off.child_env().count("CUDA_MPS_PIPE_DIRECTORY") == 1);
  CHECK(!fs::exists(*off.child_env().at("CUDA_MPS_PIPE_DIRECTORY")));
  CHECK(s.calls().empty());

  ScopedEnv shared("CUDA_MPS_PIPE_DIRECTORY", (s.dir / "no-daemon-here").string());
  rmt::MpsTools missing = s.tools;
  missing.control = (s.dir / "no-such-control").string();
  rmt::MpsSession without(rmt::MpsMode::automatic, s.owner("sweep"), missing);
  CHECK(!without.active());
  CHECK(without.line().find("is not on PATH to start one") != std::string::npos);
  CHECK(error_of([&] { rmt::MpsSession on(rmt::MpsMode::on, s.owner("sweep"), missing); })
            .find("--mps on: no MPS daemon is running and") == 0);
  // A control program that fails: auto runs without, on fails with its output.
  rmt::write_file_atomic(s.dir / "control", "#!/bin/sh\necho 'An instance of this daemon is already running'\nexit 1\n");
  fs::permissions(s.dir / "control", fs::perms::owner_all);
  rmt::MpsSession failed(rmt::MpsMode::automatic, s.owner("sweep"), s.tools);
  CHECK(!failed.active());
  CHECK(failed.line().find("status 1: An instance of this daemon is already running") != std::string::npos);
  CHECK(error_of([&] { rmt::MpsSession on(rmt::MpsMode::on, s.owner("sweep"), s.tools); })
            .find("--mps on: cannot start an MPS daemon: ") == 0);
  CHECK(!fs::exists(rmt::mps_private_pipe_dir(s.owner("sweep"))));
}

TEST_CASE("mps: modes by name; a sweep's default -j") {
  CHECK(rmt::parse_mps_mode("auto") == rmt::MpsMode::automatic);
  CHECK(rmt::parse_mps_mode("on") == rmt::MpsMode::on);
  CHECK(rmt::parse_mps_mode("off") == rmt::MpsMode::off);
  CHECK(error_of([] { rmt::parse_mps_mode("yes"); }) == "--mps yes: expected auto, on or off");
  CHECK(rmt::sweep_default_jobs(false) == 1);
  const int cores = int(std::thread::hardware_concurrency());
  CHECK(rmt::sweep_default_jobs(true) == std::clamp(cores, 1, rmt::kMpsMaxClients));
  CHECK(rmt::device_is_gpu("cuda"));
  CHECK(!rmt::device_is_gpu("cpu-guarded"));
}

TEST_CASE("process: a child's environment is the parent's with the changes; tools' output and timeout") {
  fs::path dir = fresh_dir("rmt_test_mps", "process");
  ScopedEnv keep("RMT_TEST_KEEP", "kept");
  ScopedEnv drop("RMT_TEST_DROP", "dropped");
  const fs::path log = dir / "child.log";
  CHECK(rmt::run_logged("/bin/sh", {"-c", "echo \"$RMT_TEST_KEEP|${RMT_TEST_DROP-unset}|$RMT_TEST_NEW\"; exit 3"}, log,
                        {{"RMT_TEST_DROP", std::nullopt}, {"RMT_TEST_NEW", "new"}}) == 3);
  CHECK(rmt::read_file(log) == "kept|unset|new\n");
  rmt::ToolResult r = rmt::run_tool("sh", {"-c", "read x; echo got $x; echo err >&2"}, "hello\n");
  CHECK(r.started);
  CHECK(r.status == 0);
  CHECK(r.output == "got hello\nerr\n");
  CHECK(!rmt::run_tool("rmt-no-such-tool", {}).started);
  // A tool that hangs is killed at its limit.
  r = rmt::run_tool("sleep", {"30"}, "", {}, 0.2);
  CHECK(r.status == 128 + SIGKILL);
  // A tool whose background child keeps the output open returns when the tool itself exits.
  const auto t0 = std::chrono::steady_clock::now();
  r = rmt::run_tool("sh", {"-c", "sleep 5 & echo started"}, "", {}, 10);
  CHECK(r.status == 0);
  CHECK(r.output == "started\n");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(4));
}
