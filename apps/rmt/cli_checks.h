#pragma once
// Checks on command-line values, shared by the subcommands. Each validator gives a message a
// user can act on ("--samples must be at least 1 (got 0)"), never CLI11's raw range text, and
// each integer option has an upper bound, so that no value wraps (`--seed -1` as 2^64-1) or
// overflows silently. main.cpp turns a failed check into `rmt: error: ...` and exit 1.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lib/files/output_safety.h"

namespace rmt::cli {

// A base-10 integer in [lo, hi] (no hex, no octal, no exponent); the value is rewritten in
// canonical form so CLI11's own conversion (base 0: "010" would be octal) reads the same number.
CLI::Validator int_range(int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max());
// Any int: only the type is checked here; the command checks the range where it knows it (the
// columns of --input for --answer-size).
CLI::Validator an_int();
// `--threads N`: 0 (all cores) or 1..kMaxThreads, checked here so that a value beyond int is told
// that range too, not int's.
CLI::Validator thread_count();
// Any uint64 (seeds): rejects negatives instead of wrapping them.
CLI::Validator any_uint64();
// A finite number in [lo, hi]; `lo_open` makes the lower bound exclusive ("greater than 0").
CLI::Validator number_range(double lo, double hi, bool lo_open = false);
// One of `choices` (exact, case-sensitive); the message lists them.
CLI::Validator one_of(std::vector<std::string> choices);
// `--device NAME`: the backend (backend_by_name, lib/core/backend.h). The name is checked where
// the backend is taken, so a device this build lacks is one clear error line with exit 1.
// default_text says what an absent --device means. An empty name is refused alike by every
// command (refuse_empty_values, with the devices listed).
CLI::Option* add_device_option(CLI::App* cmd, std::string& device, const std::string& default_text);
// An option or argument given an empty value ('') is refused, naming it (exit 1), by every
// command: CLI11 runs no validator on an empty value, and a command that reads an empty string
// as "not given" would silently use its default instead. Installed once on the whole CLI
// (main.cpp); it runs after CLI11 has read and checked the command line, before the command.
void refuse_empty_values(CLI::App& app);
// What refuse_empty_values says of the command line `app` has read ("" when no value is empty).
std::string empty_value_problem(CLI::App& app);
// Marks an option whose command checks an empty value itself, saying what it wants and why
// (--prompt, the SLURM values); refuse_empty_values leaves it to that check.
CLI::Option* checks_own_empty_value(CLI::Option* option);
// `--mps auto|on|off` of the commands that run sweeps (rmt sweep, rmt reproduce): how runs on a
// GPU share it (lib/experiments/mps.h).
CLI::Option* add_mps_option(CLI::App* cmd, std::string& mps);
// `--pack K` of those commands: runs of one model shape trained K at a time in one process.
CLI::Option* add_pack_option(CLI::App* cmd, int& pack);
// `-j/--jobs N` of those commands; 0 (absent) means sweep_default_jobs (lib/experiments/sweep.h).
CLI::Option* add_jobs_option(CLI::App* cmd, int& jobs);
// `--allow-changed-data`: read a run's own dataset even when it changed since the run was
// trained (lib/run/run_data.h check_run_dataset_unchanged), with a warning.
CLI::Option* add_allow_changed_data_flag(CLI::App* cmd, bool& allow);
// An existing regular file / directory (exit 1 with the path and the OS's reason otherwise).
CLI::Validator existing_file();
CLI::Validator existing_dir();

// Checks, before any work starts and without creating anything, that the output directory `dir`
// can be written: it is a directory, or its nearest existing ancestor is one, and files can be
// created there. Fails (rmt::Error) naming `option`, the path and the OS's reason.
void check_output_dir(const std::string& option, const std::string& dir);
// The same for an output file: its directory is checked, and the file must not be a directory.
void check_output_file(const std::string& option, const std::string& file);

// NamedPath, and the test of outputs against inputs: lib/files/output_safety.h.
// Checks a command's output files before anything is written, so that no output destroys
// something: none may be a special file (device node, FIFO, socket, or a link to one: rmt
// replaces an output whole, which would remove it), none may be one of the command's inputs,
// and no two outputs may be the same file. Fails (rmt::Error) naming the options and paths.
void check_outputs_safe(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs = {});

}  // namespace rmt::cli
