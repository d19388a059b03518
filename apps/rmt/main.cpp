// rmt: research toolkit for memory-augmented transformers. Entry point: builds the CLI from the
// subcommands in cmd_*.cpp and turns errors into a message and a non-zero exit status.
#include <omp.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "build_info.h"
#include "lib/core/backend.h"
#include "lib/core/provenance.h"
#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/core/model.h"
#include "lib/core/system.h"

// Built only when --version is asked for (CLI11 calls it then): loading the CUDA backend and
// asking the driver about the device takes a while, and no other command should pay for it.
static std::string version_text() {
  // What built this binary and what it runs on (lib/core/provenance.h: the same fields as a
  // run's results.json).
  std::string text = fmt::format("rmt {}\ncommit: {}\n", RMT_VERSION, RMT_GIT_COMMIT);
  for (const auto& [key, value] : rmt::provenance()) text += fmt::format("{}: {}\n", key, value);
  return text + fmt::format("openmp threads: {}\ncuda: {}\n", omp_get_max_threads(), rmt::cuda_description());
}

namespace {

// A command line rmt cannot make sense of (exit 2); `command` is where to look for help.
struct UsageError {
  std::string message, command;
};

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The subcommands a user is offered (not the hidden ones, group "": what other commands start).
std::vector<std::string> subcommand_names(CLI::App* app) {
  std::vector<std::string> names;
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; }))
    if (!sub->get_group().empty()) names.push_back(sub->get_name());
  return names;
}

std::vector<std::string> option_names(CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app->get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

bool looks_like_number(const std::string& t) {
  char* end = nullptr;
  std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size();
}

std::string unknown_option_message(const std::string& name, CLI::App* app) {
  // Only long names: one letter away from "-k" is every other short option.
  std::vector<std::string> long_names;
  for (const auto& o : option_names(app))
    if (starts_with(o, "--")) long_names.push_back(o);
  std::string near = starts_with(name, "--") ? rmt::closest_match(name, long_names) : "";
  return fmt::format("unknown option {}{}", name, near.empty() ? "" : fmt::format(" (did you mean {}?)", near));
}

// Before CLI11 parses: find the subcommand (naming an unknown one, with the closest valid name
// and the list) and, inside it, any option it does not have. CLI11 would report these late or
// not at all: a required option missing is reported before an unknown one, and an unknown
// subcommand reads as "A subcommand is required".
void check_command_line(CLI::App& app, int argc, char** argv) {
  CLI::App* cur = &app;
  std::string path = "rmt";
  int i = 1;
  auto is_help = [](const std::string& t) { return t == "-h" || t == "--help"; };
  while (!cur->get_subcommands([](CLI::App*) { return true; }).empty()) {
    const std::vector<std::string> names = subcommand_names(cur);
    const std::string list = fmt::format("{}", fmt::join(names, ", "));
    if (i >= argc) throw UsageError{fmt::format("'{}' needs a subcommand: {}", path, list), path};
    const std::string t = argv[i++];
    if (is_help(t) || (cur == &app && t == "--version")) return;  // CLI11 prints them
    if (!t.empty() && t[0] == '-') throw UsageError{unknown_option_message(t.substr(0, t.find('=')), cur), path};
    CLI::App* next = nullptr;
    for (CLI::App* sub : cur->get_subcommands([](CLI::App*) { return true; }))
      if (sub->get_name() == t) next = sub;
    if (!next) {
      std::string near = rmt::closest_match(t, names);
      throw UsageError{near.empty() ? fmt::format("unknown subcommand '{}' ({} has: {})", t, path, list)
                                    : fmt::format("unknown subcommand '{}' (did you mean '{}'?)", t, near),
                       path};
    }
    cur = next;
    path += " " + t;
  }
  // Inside the subcommand: every "-x" / "--name[=value]" must be one of its options.
  for (int j = i; j < argc; ++j)
    if (is_help(argv[j])) return;
  for (; i < argc; ++i) {
    const std::string t = argv[i];
    if (t == "--") break;
    if (t.size() < 2 || t[0] != '-' || looks_like_number(t)) continue;
    std::string name = t.substr(0, t.find('='));
    if (name[1] != '-') name = name.substr(0, 2);  // -n5 is -n with 5
    if (!cur->get_option_no_throw(name)) throw UsageError{unknown_option_message(name, cur), path};
  }
}

// "rmt data show": the subcommands CLI11 had entered when it failed.
std::string command_path(CLI::App& app) {
  std::string path = "rmt";
  CLI::App* cur = &app;
  while (!cur->get_subcommands().empty()) {
    cur = cur->get_subcommands().front();
    path += " " + cur->get_name();
  }
  return path;
}

// CLI11's message, reworded for a user; `value_error` is set for a wrong value (exit 1) as
// opposed to a command line of the wrong shape (exit 2).
std::string parse_error_message(const CLI::ParseError& e, CLI::App& app, bool& value_error) {
  std::string m = e.what();
  value_error = false;
  if (dynamic_cast<const CLI::ValidationError*>(&e) || dynamic_cast<const CLI::ConversionError*>(&e)) {
    value_error = true;
    // Our validators: "--samples: must be at least 1 (got 0)" -> "--samples must be ...";
    // a positional's name is dropped ("file: /tmp: is a directory" -> "/tmp: is a directory").
    size_t colon = m.find(": ");
    if (colon != std::string::npos && !starts_with(m, "Could not convert"))
      return starts_with(m, "-") ? m.substr(0, colon) + " " + m.substr(colon + 2) : m.substr(colon + 2);
    const std::string conv = "Could not convert: ";
    if (starts_with(m, conv)) {
      std::string rest = m.substr(conv.size());
      size_t eq = rest.find(" = ");
      if (eq != std::string::npos)
        return fmt::format("{}: cannot use '{}' (wrong type or out of range)", rest.substr(0, eq), rest.substr(eq + 3));
    }
    return m;
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e)) {
    const std::string suffix = " is required";
    if (m.size() > suffix.size() && m.compare(m.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::string name = m.substr(0, m.size() - suffix.size());
      if (!name.empty() && name[0] == '-') return fmt::format("missing required option {}", name);
      // A positional argument: say what it is.
      CLI::App* cur = &app;
      while (!cur->get_subcommands().empty()) cur = cur->get_subcommands().front();
      const CLI::Option* o = cur->get_option_no_throw(name);
      return o ? fmt::format("missing argument {} ({})", name, o->get_description())
               : fmt::format("missing argument {}", name);
    }
    return m;
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    size_t colon = m.find(": ");
    if (colon != std::string::npos) return "unexpected argument " + m.substr(colon + 2);
    return m;
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
    size_t colon = m.find(": ");
    if (colon != std::string::npos) {
      std::string name = m.substr(0, colon), rest = m.substr(colon + 2);
      if (rest.size() > 8 && rest.compare(rest.size() - 8, 8, " missing") == 0) return name + " needs a value";
      const std::string at_most = "At Most 1 required but received ";
      if (starts_with(rest, at_most)) return fmt::format("{} given {} times; give it once", name, rest.substr(at_most.size()));
    }
    return m;
  }
  return m;
}

// stdout written in full, or status 1 with a message: a full disk or a closed reader shows at a
// write (which fmt::print turns into an exception) or only at the last flush of a buffered
// stream, and a command whose output is lost must not report success.
int finish_stdout(int status) {
  errno = 0;
  std::cout.flush();  // synchronised with stdio: flushes stdout, and may be where a write fails
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout.good();
  const int flush_errno = errno;
  // The close can report what the writes did not (a network file system); a stdout closed by
  // the caller (>&-) that nothing was written to has lost nothing.
  if (!failed && (std::fclose(stdout) == 0 || errno == EBADF)) return status;
  const int err = failed ? flush_errno : errno;
  std::fprintf(stderr, "rmt: error: cannot write to standard output: %s\n",
               err ? std::strerror(err) : "write error");
  return status == 0 ? 1 : status;
}

}  // namespace

// Exit status: 0 success (and --help, --version); 1 a wrong value or input (a file, a config,
// an option's value); 2 a command line of the wrong shape (unknown subcommand or option, a
// missing or extra argument); 3 an internal error (a bug). Errors are one line on stderr.
int main(int argc, char** argv) {
  CLI::App app{"rmt: train and evaluate memory-augmented transformers (Transformer-XL, RMT)\n"
               "on algorithmic tasks, and reproduce the RMT paper's results."};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text, "Print version, commit, compiler, threads, CUDA");
  rmt::cli::add_generate_command(app);
  rmt::cli::add_data_command(app);
  rmt::cli::add_train_command(app);
  rmt::cli::add_train_pack_command(app);
  rmt::cli::add_eval_command(app);
  rmt::cli::add_step_dump_command(app);
  rmt::cli::add_sweep_command(app);
  rmt::cli::add_report_commands(app);
  rmt::cli::add_bench_command(app);
  rmt::cli::add_attn_command(app);
  rmt::cli::add_sample_command(app);
  rmt::cli::add_reproduce_command(app);
  rmt::cli::refuse_empty_values(app);
  // OMP_NUM_THREADS sets what "all cores" means (train.threads 0); a value that is no count is
  // refused rather than ignored.
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const std::string v = env;
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 4 || std::stoi(v) < 1 ||
        std::stoi(v) > rmt::kMaxThreads) {
      std::fprintf(stderr, "rmt: error: OMP_NUM_THREADS='%s': expected a thread count from 1 to %d (or unset it)\n",
                   env, rmt::kMaxThreads);
      return 1;
    }
  }
  try {
    check_command_line(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return finish_stdout(app.exit(e));  // --help, --version
  } catch (const UsageError& e) {
    std::fprintf(stderr, "rmt: error: %s; see '%s --help'\n", e.message.c_str(), e.command.c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    bool value_error = false;
    std::string message = parse_error_message(e, app, value_error);
    // CLI11 checks values before it checks that the required options are there; report the
    // command line's shape first, as its usage error.
    if (value_error) {
      CLI::App* leaf = &app;
      while (!leaf->get_subcommands().empty()) leaf = leaf->get_subcommands().front();
      for (const CLI::Option* o : leaf->get_options())
        if (o->get_required() && o->count() == 0) {
          message = parse_error_message(CLI::RequiredError(o->get_name()), app, value_error);
          break;
        }
    }
    // A validator that failed on an empty value ("-n ''": not an integer) is told as that.
    if (value_error)
      if (std::string empty = rmt::cli::empty_value_problem(app); !empty.empty()) message = empty;
    if (value_error) {
      std::fprintf(stderr, "rmt: error: %s\n", message.c_str());
      return 1;
    }
    std::string path = command_path(app);
    std::fprintf(stderr, "rmt: error: %s; see '%s --help'\n", message.c_str(), path.c_str());
    return 2;
  } catch (const rmt::Error& e) {
    std::fprintf(stderr, "rmt: error: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be created or read (a directory where a file should be,
    // no permission, a full disk): their input or their machine, not a bug. Callers wrap what
    // they can with more context; this keeps the rest from reading as an internal error.
    // "filesystem error: cannot create directories: Permission denied [/a/b]" ->
    // "cannot create directories /a/b: Permission denied"
    std::string what = e.what(), reason = e.code().message();
    const std::string prefix = "filesystem error: ";
    if (starts_with(what, prefix)) what = what.substr(prefix.size());
    size_t cut = what.find(": " + reason);
    if (cut != std::string::npos && !e.path1().empty()) {
      what = what.substr(0, cut) + " " + e.path1().string();
      if (!e.path2().empty()) what += " and " + e.path2().string();
      what += ": " + reason;
    }
    std::fprintf(stderr, "rmt: error: %s\n", what.c_str());
    return 1;
  } catch (const std::system_error& e) {
    // fmt::print's failed write ("cannot write to file: No space left on device"); on stdout,
    // said as such.
    if (std::ferror(stdout))
      std::fprintf(stderr, "rmt: error: cannot write to standard output: %s\n", e.code().message().c_str());
    else
      std::fprintf(stderr, "rmt: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "rmt: error: out of memory; a size in the options or the config is too large for "
                         "this machine (physical memory %s)\n",
                 rmt::format_bytes(double(rmt::sys::physical_memory_bytes())).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rmt: internal error: %s\n", e.what());
    return 3;
  }
  return finish_stdout(0);
}
