#pragma once
// File helpers. Every file rmt writes goes through write_file_atomic: the bytes land in a
// temporary file beside the target, are flushed to disk, then renamed over the target, so a
// killed process leaves either the old file or the new one, never a torn one.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace rmt {

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);
// The whole file; fails naming what `path` is when it is no regular file (not_a_regular_file).
std::string read_file(const std::filesystem::path& path);

// What is wrong with `path` where a reader expects a regular file (links followed), or "" when
// it is one: "no such file", "is a directory, expected a file", "is a FIFO, not a regular file"
// (a socket, a character or block device alike), "is a link to nothing (a dangling link)". Every
// reader's message says it after the path, so a FIFO is never "not found" nor a directory "no
// such file"; a FIFO is also never opened, which would wait for a writer forever.
std::string not_a_regular_file(const std::filesystem::path& path);
// Fails with "PATH: <not_a_regular_file>" (`label`, such as "--vocab", before the path) unless
// `path` is a regular file.
void require_regular_file(const std::filesystem::path& path, const std::string& label = "");
// Appends one line (a '\n' is added) with a single write(2) and fsync, so a killed process
// never leaves half a line behind for readers that stop at the last '\n'.
void append_line(const std::filesystem::path& path, std::string_view line);
// Removes DIR/NAME.tmp.PID files (write_file_atomic's temp files) that a killed writer left
// behind, for the given NAMEs only and only where PID is no live process (kill(PID, 0) fails
// with ESRCH), so another process's write in progress is never touched. Returns what it removed.
std::vector<std::filesystem::path> remove_stale_temp_files(const std::filesystem::path& dir,
                                                           const std::vector<std::string>& names);

// An exclusive advisory lock (flock) on a directory, held while the object lives and released
// by the kernel when the process dies, however it dies.
class DirectoryLock {
 public:
  DirectoryLock() = default;
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  ~DirectoryLock();
  // False when another process holds it; fails (rmt::Error) when the directory cannot be opened.
  bool try_lock(const std::filesystem::path& dir);

 private:
  int fd_ = -1;
};

// Creates `dir` and its missing parents, like std::filesystem::create_directories, but fails with
// an rmt::Error naming the path and the OS's reason ("... is not a directory", "Permission
// denied") instead of throwing std::filesystem_error.
void create_directories_or_fail(const std::filesystem::path& dir);
// sha256 of a byte string as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

// Kill tests only (tests/test_kill_*.cpp): with RMT_TEST_KILL_AT_WRITE=N or N:TEXT in its
// environment, a process SIGKILLs itself at the Nth "write point" among the files whose path
// contains TEXT (all files without it). Every write_file_atomic and append_line has three
// points: (1) half the bytes written (a torn temp file or line), (2) all bytes written, not yet
// committed (before the rename or the fsync), (3) committed. The variable is read once at startup
// and removed from the environment, so it never reaches the processes this one starts (a
// sweep's runs). Unset, it costs one comparison per file written.
constexpr const char* kKillAtWriteEnv = "RMT_TEST_KILL_AT_WRITE";

}  // namespace rmt
