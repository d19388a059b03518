#pragma once
// One exception type for every user-facing failure: the CLI prints its message and exits 1.
#include <stdexcept>
#include <string>
#include <fmt/format.h>

namespace rmt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace rmt
