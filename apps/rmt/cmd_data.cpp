// `rmt data show|check DIR`: prints decoded samples or the result of validating a dataset.
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "lib/core/error.h"
#include "tasks/family.h"

namespace rmt::cli {

void add_data_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("data", "Show or check a dataset directory");
  cmd->require_subcommand(1);

  struct ShowArgs {
    std::string dir, split = "train";
    int n = 5;
    int64_t bytes = 400;
  };
  auto show = std::make_shared<ShowArgs>();
  auto* show_cmd = cmd->add_subcommand(
      "show", "Print decoded samples (the answer follows '|'), or the start of each split of a text dataset");
  show_cmd->add_option("dir", show->dir, "Dataset directory (ours or the authors')")->required();
  auto* split = show_cmd->add_option("--split", show->split, "train, val or test (default train; text: all three)");
  auto* n = show_cmd->add_option("-n", show->n, "Number of samples to show (default 5)")
      ->transform(int_range(0, std::numeric_limits<int>::max()));
  auto* bytes = show_cmd->add_option("--bytes", show->bytes,
                                     "text: bytes of each split to show (default 400); valid UTF-8 is shown as text, "
                                     "other non-printable bytes as \\xNN, \\t, \\r")
      ->transform(int_range(0));
  show_cmd->callback([=] {
    ShowRequest request;
    if (split->count()) request.split = show->split;
    if (n->count()) request.samples = show->n;
    if (bytes->count()) request.bytes = show->bytes;
    for (const std::string& line : show_dataset(show->dir, request)) fmt::print("{}\n", line);
  });

  auto check_dir = std::make_shared<std::string>();
  auto* check_cmd = cmd->add_subcommand(
      "check", "Validate shapes, dtype, ids, task invariants, split overlap and sha256 (text: sizes, sha256, and that the "
      "splits put back the source); exit 1 on any violation");
  check_cmd->add_option("dir", *check_dir, "Dataset directory (ours or the authors')")->required();
  check_cmd->callback([check_dir] {
    CheckResult r = check_dataset(*check_dir);
    for (const std::string& line : r.summary) fmt::print("{}\n", line);
    if (!r.ok) fail("{}", invalid_dataset_message(*check_dir, r.violations));
  });
}

}  // namespace rmt::cli
