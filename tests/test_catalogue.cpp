// Runs the catalogue of bad inputs (tests/catalogue.h): every case must fail with its exact exit
// status, print its specific message as one `rmt: error: ...` line, and never crash.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>

#include "tests/catalogue.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

static std::vector<BadInput>& catalogue_storage() {
  static std::vector<BadInput> cases;
  return cases;
}

int register_bad_inputs(std::vector<BadInput> cases) {
  for (auto& c : cases) catalogue_storage().push_back(std::move(c));
  return (int)catalogue_storage().size();
}

const std::vector<BadInput>& bad_input_catalogue() { return catalogue_storage(); }

static std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

TEST_CASE("catalogue of bad inputs: each is a clear error with the documented exit status") {
  const auto& cases = bad_input_catalogue();
  std::map<std::string, int> per_category;
  for (size_t i = 0; i < cases.size(); ++i) {
    const BadInput& c = cases[i];
    per_category[c.category]++;
    std::string dir = fresh_tmp("rmt_catalogue", std::to_string(i));
    fs::create_directories(dir);
    if (c.setup) c.setup(dir);
    std::string args = replace_all(c.args, "{dir}", dir);
    Run r = rmt_run(args);
    CAPTURE(c.category);
    CAPTURE(c.name);
    CAPTURE(args);
    CAPTURE(r.output);
    CHECK(r.status == c.status);
    CHECK(r.output.find(replace_all(c.message, "{dir}", dir)) != std::string::npos);
    // One line, in the documented form; never a crash or an internal error.
    CHECK(r.output.find("internal error") == std::string::npos);
    if (c.status == 1) CHECK(r.output.find("rmt: error: ") != std::string::npos);
    fs::remove_all(dir);
  }
  MESSAGE("catalogue: " << cases.size() << " cases in " << per_category.size() << " categories");
}

TEST_CASE("the catalogue covers every file reader and subcommand") {
  std::map<std::string, int> per_category;
  for (const BadInput& c : bad_input_catalogue()) per_category[c.category]++;
  std::string listed;
  for (const auto& [category, n] : per_category) listed += category + " " + std::to_string(n) + ", ";
  MESSAGE("catalogue categories: " << listed);
  CHECK(bad_input_catalogue().size() >= 80);
  // The readers and subcommands docs/reliability.md names.
  for (const char* category : {"npy", "safetensors", "config", "sweep", "results.csv", "meta.yaml",
                               "train", "eval", "step-dump", "run-dir", "generate", "data check"})
    CHECK_MESSAGE(per_category.count(category) == 1, category);
}
