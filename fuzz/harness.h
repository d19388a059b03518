#pragma once
// Shared by the fuzz harnesses (fuzz/<name>.cpp). Each harness defines LLVMFuzzerTestOneInput:
// it feeds the bytes to a reader, accepts an rmt::Error (a clear message is the right answer to
// a bad input), and aborts on anything else: another exception type (the CLI would print
// "internal error"), a broken invariant of what was read, or, under the sanitizers, a memory
// error or undefined behaviour. The same file builds two ways: with clang and libFuzzer
// (fuzz/CMakeLists.txt, `make fuzz`), and with the project's compiler and fuzz/regress_main.cpp,
// which replays fuzz/regressions/<name>/ and fuzz/corpus/<name>/ in `make test`.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/error.h"

namespace rmt_fuzz {

// Aborts with a message: a crash for libFuzzer and a failure for the regression runner.
[[noreturn]] inline void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

inline void require(bool ok, const std::string& what) {
  if (!ok) broken(what);
}

// Runs one reader call: rmt::Error is a correct rejection; any other exception is a bug.
template <typename Action>
bool accepts(Action action) {
  try {
    action();
    return true;
  } catch (const rmt::Error&) {
    return false;
  } catch (const std::exception& e) {
    broken(std::string("a non-rmt::Error exception escaped (the CLI would say \"internal error\"): ") + e.what());
  } catch (...) {
    broken("an exception of unknown type escaped");
  }
}

// The input split at NUL bytes: harnesses that need several texts (a config and its --set
// overrides, a results.csv and a paper YAML) take them from one input this way.
inline std::vector<std::string> split_at_nul(std::string_view bytes) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t nul = bytes.find('\0', start);
    if (nul == std::string_view::npos) {
      parts.emplace_back(bytes.substr(start));
      return parts;
    }
    parts.emplace_back(bytes.substr(start, nul - start));
    start = nul + 1;
  }
}

// For readers that only take a path: `bytes` as a file that lives in memory (memfd), named by
// its /proc/self/fd path. Nothing is written to any disk or directory, and nothing is left
// behind when the fuzzer stops on a crash.
inline std::string memory_file(std::string_view bytes) {
  static const int fd = [] {
    int made = memfd_create("rmt_fuzz_input", 0);
    if (made < 0) broken("memfd_create failed");
    return made;
  }();
  if (ftruncate(fd, 0) != 0) broken("ftruncate failed");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = pwrite(fd, bytes.data() + done, bytes.size() - done, off_t(done));
    if (n <= 0) broken("pwrite failed");
    done += size_t(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace rmt_fuzz
