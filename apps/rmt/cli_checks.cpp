#include "apps/rmt/cli_checks.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "lib/core/backend.h"
#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/core/model.h"
#include "lib/files/io.h"

namespace rmt::cli {

namespace fs = std::filesystem;

namespace {

// Parses a whole base-10 integer (optional sign); false on anything else. `overflow` is set when
// it is an integer too large for int64 (or uint64 when `as_unsigned`).
bool parse_integer(const std::string& s, bool as_unsigned, int64_t& v, uint64_t& u, bool& overflow) {
  overflow = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) i++;
  if (i == s.size()) return false;
  for (size_t j = i; j < s.size(); j++)
    if (s[j] < '0' || s[j] > '9') return false;
  errno = 0;
  if (as_unsigned && s[0] != '-') {
    u = std::strtoull(s.c_str(), nullptr, 10);
  } else {
    v = std::strtoll(s.c_str(), nullptr, 10);
  }
  overflow = errno == ERANGE;
  return true;
}

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

}  // namespace

CLI::Validator int_range(int64_t lo, int64_t hi) {
  // An upper bound that is only the type's limit is not worth a "from 1 to 2147483647".
  const bool unbounded = hi == std::numeric_limits<int64_t>::max() || hi == std::numeric_limits<int>::max();
  const std::string bounds = unbounded ? fmt::format("at least {}", lo) : fmt::format("from {} to {}", lo, hi);
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        int64_t v = 0;
        uint64_t u = 0;
        bool overflow = false;
        if (!parse_integer(s, false, v, u, overflow))
          return fmt::format("must be an integer{} {} (got {})", unbounded ? "," : "", bounds, in_quotes(s));
        if ((overflow && s[0] != '-') || (v > hi && unbounded)) return fmt::format("must be at most {} (got {})", hi, s);
        if (overflow || v < lo || v > hi) return fmt::format("must be {} (got {})", bounds, s);
        s = std::to_string(v);
        return "";
      },
      unbounded ? fmt::format(">={}", lo) : fmt::format("{}..{}", lo, hi));
}

CLI::Validator an_int() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        int64_t v = 0;
        uint64_t u = 0;
        bool overflow = false;
        if (!parse_integer(s, false, v, u, overflow)) return fmt::format("must be an integer (got {})", in_quotes(s));
        if (overflow || v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
          return fmt::format("must be an integer from {} to {} (got {})", std::numeric_limits<int>::min(),
                             std::numeric_limits<int>::max(), s);
        s = std::to_string(v);
        return "";
      },
      "");
}

CLI::Validator thread_count() { return int_range(0, kMaxThreads); }

CLI::Validator any_uint64() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        int64_t v = 0;
        uint64_t u = 0;
        bool overflow = false;
        if (!parse_integer(s, true, v, u, overflow) || s[0] == '-' || overflow)
          return fmt::format("must be an integer from 0 to {} (got {})", std::numeric_limits<uint64_t>::max(),
                             in_quotes(s));
        s = std::to_string(u);
        return "";
      },
      fmt::format("0..{}", std::numeric_limits<uint64_t>::max()));
}

CLI::Validator number_range(double lo, double hi, bool lo_open) {
  std::string bounds = std::isinf(hi) ? fmt::format("{} {}", lo_open ? "greater than" : "at least", lo)
                                      : fmt::format("{} {} and at most {}", lo_open ? "greater than" : "at least", lo, hi);
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        char* end = nullptr;
        // An overflow is infinite; an underflow (1e-320, a subnormal, or 1e-400, 0) is a number,
        // checked against the bounds like any other (strtod's ERANGE says both).
        double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
          return fmt::format("must be a finite number {} (got {})", bounds, in_quotes(s));
        if (v < lo || (lo_open && v == lo) || v > hi) return fmt::format("must be {} (got {})", bounds, s);
        return "";
      },
      std::isinf(hi) ? fmt::format("{}{}", lo_open ? ">" : ">=", lo) : fmt::format("{}..{}", lo, hi));
}

CLI::Validator one_of(std::vector<std::string> choices) {
  std::string list = fmt::format("{}", fmt::join(choices, ", "));
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        if (std::find(choices.begin(), choices.end(), s) != choices.end()) return "";
        std::string near = closest_match(s, choices);
        return fmt::format("must be one of {} (got {}{})", list, in_quotes(s),
                           near.empty() ? "" : fmt::format("; did you mean {}?", in_quotes(near)));
      },
      "{" + fmt::format("{}", fmt::join(choices, ",")) + "}");
}

CLI::Validator existing_file() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::error_code ec;
        if (!fs::exists(fs::symlink_status(s, ec))) return fmt::format("{}: no such file", s);
        // Else what the path is when it is no file: a directory, a FIFO, a dangling link ...
        if (std::string problem = not_a_regular_file(s); !problem.empty()) return fmt::format("{}: {}", s, problem);
        if (::access(s.c_str(), R_OK) != 0) return fmt::format("{}: cannot read: {}", s, std::strerror(errno));
        return "";
      },
      "FILE");
}

CLI::Validator existing_dir() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::error_code ec;
        auto st = fs::status(s, ec);
        if (ec || !fs::exists(st)) return fmt::format("{}: no such directory", s);
        if (!fs::is_directory(st)) return fmt::format("{}: is not a directory", s);
        return "";
      },
      "DIR");
}

// `shown` is what the user gave (a directory, or a file inside `dir`).
static void check_writable_dir(const std::string& option, const std::string& shown, const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  std::error_code ec;
  // The nearest part of the path that exists must be a directory we may create files in.
  while (!fs::exists(fs::symlink_status(p, ec)) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  if (!fs::exists(fs::symlink_status(p, ec))) p = ".";
  if (!fs::is_directory(p, ec)) {
    if (p.string() == shown) fail("{} {}: exists and is not a directory", option, shown);
    fail("{} {}: {} is not a directory", option, shown, p.string());
  }
  if (::access(p.c_str(), W_OK | X_OK) != 0)
    fail("{} {}: cannot write in {}: {}", option, shown, p.string(), std::strerror(errno));
}

void check_output_dir(const std::string& option, const std::string& dir) {
  if (dir.empty()) fail("{} is empty; give a directory", option);
  check_writable_dir(option, dir, dir);
}

void check_output_file(const std::string& option, const std::string& file) {
  if (file.empty()) fail("{} is empty; give a file name", option);
  std::error_code ec;
  if (fs::is_directory(file, ec)) fail("{} {}: is a directory, expected a file name", option, file);
  check_outputs_safe({{option, file}});
  fs::path parent = fs::path(file).parent_path();
  check_writable_dir(option, file, parent.empty() ? "." : parent.string());
}

namespace {

// "a FIFO", "a character device", ...; "" for a regular file, a directory or nothing.
std::string special_kind(const fs::file_status& st) {
  switch (st.type()) {
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::unknown: return "a special file";
    default: return "";
  }
}

}  // namespace

void check_outputs_safe(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  for (const NamedPath& out : outputs) {
    std::error_code ec;
    const std::string kind = special_kind(fs::status(out.path, ec));
    if (!ec && !kind.empty()) {
      const bool link = fs::is_symlink(fs::symlink_status(out.path, ec));
      fail("{} {}: is {}{}; rmt writes its outputs as regular files (a new file replaces the old "
           "whole), which would remove it: give a regular file's name", out.option, out.path,
           link ? "a link to " : "", kind);
    }
  }
  check_outputs_not_inputs(outputs, inputs);
}

CLI::Option* add_device_option(CLI::App* cmd, std::string& device, const std::string& default_text) {
  // An empty name is refused by refuse_empty_values, with empty_device_message.
  return cmd->add_option(
      "--device", device,
      fmt::format("Backend that runs it: {} in this build{} (default: {})", known_devices(),
                  known_devices().find("cuda") == std::string::npos ? ", cuda in one built with CUDA" : "",
                  default_text));
}

namespace {

std::vector<const CLI::Option*>& options_checking_own_empty_value() {
  static std::vector<const CLI::Option*> options;
  return options;
}

// An empty device name is not "the default" (some commands read it as cpu, others refused it);
// the devices are listed. A name is checked where the backend is taken (backend_by_name).
std::string empty_device_message() {
  return fmt::format("--device must name a device ({} in this build, cuda in one built with CUDA); got '' "
                     "(leave --device out for the default)", known_devices());
}

// The first option of `cmd`, or of the subcommand it ran, given an empty value: what to say.
std::string empty_value_in(CLI::App* cmd) {
  const auto& own = options_checking_own_empty_value();
  for (const CLI::Option* option : cmd->get_options()) {
    if (option->get_type_size() == 0 || option->count() == 0) continue;  // a flag, or not given
    if (std::find(own.begin(), own.end(), option) != own.end()) continue;
    const auto& values = option->results();
    if (std::find(values.begin(), values.end(), std::string()) == values.end()) continue;
    if (option->get_name() == "--device") return empty_device_message();
    const bool positional = option->get_lnames().empty() && option->get_snames().empty();
    if (positional) return fmt::format("argument {}: empty value ''; give one", option->get_name());
    if (option->get_required()) return fmt::format("{}: empty value ''; give one", option->get_name());
    return fmt::format("{0}: empty value ''; give one, or leave {0} out for its default", option->get_name());
  }
  for (CLI::App* sub : cmd->get_subcommands())
    if (std::string problem = empty_value_in(sub); !problem.empty()) return problem;
  return "";
}

}  // namespace

std::string empty_value_problem(CLI::App& app) { return empty_value_in(&app); }

void refuse_empty_values(CLI::App& app) {
  // The root's parse-complete callback runs once every option is read, validated and the
  // required ones found, and before any subcommand's own callback (the command) runs. A
  // validator that failed on the empty value is reported as this too (main.cpp).
  app.parse_complete_callback([&app] {
    if (std::string problem = empty_value_problem(app); !problem.empty()) throw Error(problem);
  });
}

CLI::Option* checks_own_empty_value(CLI::Option* option) {
  options_checking_own_empty_value().push_back(option);
  return option;
}

CLI::Option* add_mps_option(CLI::App* cmd, std::string& mps) {
  return cmd->add_option("--mps", mps,
                         "How runs on a GPU share it: auto uses a running NVIDIA MPS daemon, or starts one for "
                         "the sweep (stopped after) where no other process is on the GPU; on starts one "
                         "regardless and fails if it cannot; off never uses MPS. Ignored by runs on the CPU")
      ->capture_default_str()->check(one_of({"auto", "on", "off"}));
}

CLI::Option* add_pack_option(CLI::App* cmd, int& pack) {
  return cmd->add_option("--pack", pack,
                         "Train the runs that share a model shape together, this many at a time in one process and "
                         "one computation per step (each run still its own: seed, data order, curriculum, "
                         "checkpoints, results, bit-identical to the run alone with one thread; a run that ends "
                         "leaves its slot to the next). -j then counts processes; language models train alone")
      ->capture_default_str()->transform(int_range(1, 4096));
}

CLI::Option* add_jobs_option(CLI::App* cmd, int& jobs) {
  return cmd->add_option("-j,--jobs", jobs,
                         "Runs at a time (default: 1 on the CPU, the cores then split between the runs; one per "
                         "core when the runs are on a GPU)")
      ->transform(int_range(1, kMaxThreads));
}

CLI::Option* add_allow_changed_data_flag(CLI::App* cmd, bool& allow) {
  return cmd->add_flag("--allow-changed-data", allow,
                       "Read the run's own dataset even if it changed since the run was trained "
                       "(its fingerprint differs from the one the run recorded); prints a warning");
}

}  // namespace rmt::cli
