#include "lib/files/io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <openssl/evp.h>

#include "lib/core/error.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

// The kill-test hook (see kKillAtWriteEnv in io.h).
struct KillAtWrite {
  long long at = 0;   // the point to die at; 0: never
  std::string match;  // count only files whose path contains this
  long long seen = 0;
};

KillAtWrite read_kill_at_write() {
  KillAtWrite k;
  const char* value = std::getenv(kKillAtWriteEnv);
  if (!value) return k;
  std::string text = value;
  size_t colon = text.find(':');
  k.at = std::atoll(text.substr(0, colon).c_str());
  if (colon != std::string::npos) k.match = text.substr(colon + 1);
  ::unsetenv(kKillAtWriteEnv);
  return k;
}

KillAtWrite g_kill_at_write = read_kill_at_write();

bool kill_hook_armed(const fs::path& path) {
  return g_kill_at_write.at > 0 &&
         (g_kill_at_write.match.empty() || path.string().find(g_kill_at_write.match) != std::string::npos);
}

void kill_point() {
  if (++g_kill_at_write.seen == g_kill_at_write.at) ::raise(SIGKILL);
}

}  // namespace

static void write_all(int fd, std::string_view bytes, const fs::path& path) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write {}: {}", path.string(), std::strerror(errno));
    }
    p += n;
    left -= size_t(n);
  }
}

// The rename of write_file_atomic replaces whatever `path` names; refuse where that is not a
// regular file's contents: a device node, FIFO or socket (or a link to one) would be removed
// (/dev/null replaced by a file, as root), a directory cannot be.
static void check_replaceable(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st) || fs::is_regular_file(st)) return;
  const char* kind = fs::is_directory(st) ? "a directory"
                     : st.type() == fs::file_type::fifo ? "a FIFO"
                     : st.type() == fs::file_type::character ? "a character device"
                     : st.type() == fs::file_type::block ? "a block device"
                     : st.type() == fs::file_type::socket ? "a socket" : "a special file";
  fail("cannot write {}: it is {}{}, not a regular file; writing replaces the file whole, which "
       "would remove it", path.string(), fs::is_symlink(fs::symlink_status(path, ec)) ? "a link to " : "", kind);
}

// The start of a temp file's name for `name`, before the writer's PID: NAME.tmp., or for a
// name so long that the PID would take it past the file system's 255 bytes, its first bytes (a
// valid 251-byte name must not fail as "File name too long"). Two such names that share their
// first 241 bytes share the prefix: a process writes one file at a time, and renames it away.
static std::string temp_prefix(const std::string& name) {
  constexpr size_t kNameMax = 255, kSuffix = 5 + 9;  // ".tmp." and up to 9 digits of PID
  return (name.size() + kSuffix <= kNameMax ? name : name.substr(0, kNameMax - kSuffix)) + ".tmp.";
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  check_replaceable(path);
  const fs::path tmp = path.parent_path() / fmt::format("{}{}", temp_prefix(path.filename().string()), ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail("cannot write {}: {}", path.string(), std::strerror(errno));
  const bool hooked = kill_hook_armed(path);
  try {
    if (hooked) {
      write_all(fd, bytes.substr(0, bytes.size() / 2), tmp);
      kill_point();
      bytes.remove_prefix(bytes.size() / 2);
    }
    write_all(fd, bytes, tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::fsync(fd);
  ::close(fd);
  if (hooked) kill_point();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot rename {} to {}: {}", tmp.string(), path.string(), std::strerror(err));
  }
  if (hooked) kill_point();
}

std::string not_a_regular_file(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_regular_file(st)) return "";
  if (!fs::exists(st)) {
    if (fs::is_symlink(fs::symlink_status(path, ec))) return "is a link to nothing (a dangling link)";
    if (ec && ec != std::errc::no_such_file_or_directory) return fmt::format("cannot be read: {}", ec.message());
    return "no such file";
  }
  if (fs::is_directory(st)) return "is a directory, expected a file";
  const char* kind = st.type() == fs::file_type::fifo        ? "a FIFO"
                     : st.type() == fs::file_type::character ? "a character device"
                     : st.type() == fs::file_type::block     ? "a block device"
                     : st.type() == fs::file_type::socket    ? "a socket"
                                                             : "a special file";
  return fmt::format("is {}, not a regular file", kind);
}

void require_regular_file(const fs::path& path, const std::string& label) {
  const std::string problem = not_a_regular_file(path);
  if (!problem.empty()) fail("{}{}{}: {}", label, label.empty() ? "" : " ", path.string(), problem);
}

std::string read_file(const fs::path& path) {
  // An ifstream opens a directory and then reads nothing, and waits on a FIFO for a writer:
  // say what the path is instead.
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}: {}", path.string(), std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read {}: {}", path.string(), std::strerror(errno));
  return ss.str();
}

void create_directories_or_fail(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  // The part of the path that exists must be a directory; name it when it is a file.
  for (fs::path p = dir; !p.empty() && p.has_relative_path(); p = p.parent_path()) {
    if (fs::exists(fs::symlink_status(p, ec)) && !fs::is_directory(p, ec)) {
      if (p == dir) fail("cannot create directory {}: it exists and is not a directory", dir.string());
      fail("cannot create directory {}: {} is not a directory", dir.string(), p.string());
    }
    if (p == p.parent_path()) break;
  }
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create directory {}: {}", dir.string(), ec.message());
}

void append_line(const fs::path& path, std::string_view line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) fail("cannot open {} for appending: {}", path.string(), std::strerror(errno));
  std::string buf(line);
  buf += '\n';
  const bool hooked = kill_hook_armed(path);
  try {
    std::string_view rest = buf;
    if (hooked) {
      write_all(fd, rest.substr(0, rest.size() / 2), path);
      kill_point();
      rest.remove_prefix(rest.size() / 2);
    }
    write_all(fd, rest, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (hooked) kill_point();
  ::fsync(fd);
  ::close(fd);
  if (hooked) kill_point();
}

// Whether pid names a running process. A zombie (killed, not yet reaped: e.g. a killed
// sweep's run, until init reaps it) writes nothing more, so it counts as dead.
static bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!stat || !std::getline(stat, line)) return true;  // no /proc: trust kill()
  size_t paren = line.rfind(')');  // "PID (COMM) STATE ...": COMM may hold spaces and ')'
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

std::vector<fs::path> remove_stale_temp_files(const fs::path& dir,
                                              const std::vector<std::string>& names) {
  std::vector<fs::path> removed;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    for (const std::string& name : names) {
      const std::string prefix = temp_prefix(name);
      if (file.size() <= prefix.size() || file.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string digits = file.substr(prefix.size());
      if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t pid = pid_t(std::stol(digits));
      if (pid == ::getpid()) continue;  // our own write in progress (never, from the caller)
      if (pid > 0 && process_alive(pid)) continue;  // a live process's
      std::error_code rm;
      if (fs::remove(it->path(), rm)) removed.push_back(it->path());
    }
  }
  return removed;
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

bool DirectoryLock::try_lock(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory {}: {}", dir.string(), std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) return false;
    fail("cannot lock directory {}: {}", dir.string(), std::strerror(err));
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  return true;
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr) != 1)
    fail("sha256 failed");
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace rmt
