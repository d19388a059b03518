#pragma once
// The catalogue of bad inputs (docs/reliability.md): each case prepares files in a fresh
// directory, runs `rmt ARGS` as a user would, and asserts the exact exit status and a specific
// part of the message. Cases live in tests/catalogue_*.cpp, one file per area, each a table
// registered with RMT_CATALOGUE; test_catalogue.cpp runs them all and counts them.
#include <functional>
#include <string>
#include <vector>

struct BadInput {
  std::string category;  // the reader or subcommand it exercises: "npy", "meta.yaml", "train", ...
  std::string name;      // what is wrong, in a few words
  // Writes whatever the case needs into `dir` (a fresh, existing directory); may be empty.
  std::function<void(const std::string& dir)> setup;
  std::string args;     // rmt's arguments; every "{dir}" is replaced by the case's directory
  int status;           // the exit status expected: 1 bad input, 2 usage; 0 for an input that is
                        // refused by being left out (rmt reproduce's results of an earlier config)
  std::string message;  // must appear in the output (stdout and stderr): the error, or for status 0
                        // the line that says what was left out
};

// Shared setup: {dir}/d, a tiny copy dataset, and {dir}/c.yaml, a 2-step run on it
// (tests/catalogue_outputs.cpp).
void copy_data_and_config(const std::string& dir);
// Shared setup: copy_data_and_config, then {dir}/run, that run trained (its 2 steps) by
// `rmt train` (tests/catalogue_outputs.cpp).
void trained_copy_run(const std::string& dir);

// Adds `cases` to the catalogue; returns how many (for static registration).
int register_bad_inputs(std::vector<BadInput> cases);
const std::vector<BadInput>& bad_input_catalogue();

#define RMT_CATALOGUE_CONCAT2(a, b) a##b
#define RMT_CATALOGUE_CONCAT(a, b) RMT_CATALOGUE_CONCAT2(a, b)
// RMT_CATALOGUE({ {...}, {...} }); at namespace scope registers a table of cases.
#define RMT_CATALOGUE(...) \
  static const int RMT_CATALOGUE_CONCAT(rmt_catalogue_, __LINE__) = register_bad_inputs(__VA_ARGS__)
