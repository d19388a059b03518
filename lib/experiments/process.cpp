// Child processes (process.h). The environment and argv are built before fork: between fork and
// exec a child of a threaded process may only make async-signal-safe calls.
#include "lib/experiments/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "lib/core/error.h"

extern char** environ;

namespace rmt {

namespace fs = std::filesystem;

namespace {

// argv and envp for execve, owning their strings.
struct ExecImage {
  std::string path;
  std::vector<std::string> arg_strings, env_strings;
  std::vector<char*> argv, envp;

  ExecImage(const std::string& binary, const std::vector<std::string>& args, const EnvChanges& env)
      : path(binary) {
    arg_strings.push_back(binary);
    arg_strings.insert(arg_strings.end(), args.begin(), args.end());
    for (char** e = environ; e && *e; ++e) {
      std::string entry = *e;
      std::string name = entry.substr(0, entry.find('='));
      if (!env.count(name)) env_strings.push_back(entry);
    }
    for (const auto& [name, value] : env)
      if (value) env_strings.push_back(name + "=" + *value);
    for (auto& a : arg_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

// In the child: report why exec failed on fd 2 and end (async-signal-safe calls only).
[[noreturn]] void exec_or_die(const ExecImage& image) {
  execve(image.path.c_str(), image.argv.data(), image.envp.data());
  const char* what = strerror(errno);
  const char prefix[] = "rmt: cannot run ";
  (void)!write(2, prefix, sizeof prefix - 1);
  (void)!write(2, image.path.c_str(), image.path.size());
  (void)!write(2, ": ", 2);
  (void)!write(2, what, strlen(what));
  (void)!write(2, "\n", 1);
  _exit(127);
}

}  // namespace

std::string find_program(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return "";
}

int exit_code(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

pid_t spawn_logged(const std::string& binary, const std::vector<std::string>& args, const fs::path& log,
                   const EnvChanges& env) {
  const ExecImage image(binary, args, env);
  const std::string log_path = log.string();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) fail("fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before the line above
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    exec_or_die(image);
  }
  return pid;
}

int run_logged(const std::string& binary, const std::vector<std::string>& args, const fs::path& log,
               const EnvChanges& env) {
  const pid_t pid = spawn_logged(binary, args, log, env);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return exit_code(status);
}

ToolResult run_tool(const std::string& program, const std::vector<std::string>& args, const std::string& input,
                    const EnvChanges& env, double timeout_s, const fs::path& stderr_file) {
  ToolResult result;
  const std::string path = find_program(program);
  if (path.empty()) return result;
  const ExecImage image(path, args, env);
  const std::string err_path = stderr_file.string();
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) fail("pipe failed: {}", std::strerror(errno));
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    fail("pipe failed: {}", std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) fail("fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    const int err = err_path.empty() ? -1 : open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    dup2(err >= 0 ? err : out[1], 2);
    exec_or_die(image);
  }
  close(in[0]);
  close(out[1]);
  // The input is small (a control command): written whole before reading. SIGPIPE is ignored
  // for the write, so that a tool that does not read its input does not end rmt.
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old);
  for (size_t done = 0; done < input.size();) {
    ssize_t n = write(in[1], input.data() + done, input.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  sigaction(SIGPIPE, &old, nullptr);
  close(in[1]);
  // Read until the tool exits; a daemon it forked may hold the pipe open long after, so the pipe's
  // end is not awaited: what is readable once the tool has exited is the last of its output.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  bool exited = false, eof = false;
  char buffer[4096];
  while (true) {
    pollfd p{out[0], POLLIN, 0};
    const int ready = eof ? 0 : poll(&p, 1, exited ? 0 : 20);
    if (ready > 0) {
      ssize_t n = read(out[0], buffer, sizeof buffer);
      if (n > 0) {
        result.output.append(buffer, size_t(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      eof = true;  // every writer closed it (or it broke): only the exit is left to wait for
    }
    if (exited) break;
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      exited = true;
      continue;  // drain what is readable now
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
      break;
    }
    if (eof) usleep(5000);
  }
  close(out[0]);
  result.started = true;  // found and executable (an exec that failed anyway says so in output, status 127)
  result.status = exit_code(status);
  return result;
}

}  // namespace rmt
