// `rmt data show|check DIR`: prints decoded samples or the result of validating a dataset;
// `rmt data import SRC --out DIR`: a user's own task in rmt's layout (tasks/import.h).
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "lib/core/error.h"
#include "tasks/family.h"
#include "tasks/import.h"

namespace rmt::cli {

void add_data_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("data", "Show, check or import a dataset directory");
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

  auto import = std::make_shared<ImportRequest>();
  auto* import_cmd = cmd->add_subcommand(
      "import",
      "Bring your own task: check SRC/NAME_{train,val,test}_{X,y}.npy (integer arrays; X [N, Lx] is what the model "
      "reads, y [N, Ly] the answer it writes after X) and write them in rmt's layout with meta.yaml, to train, "
      "evaluate and show like a built-in task (docs/datasets.md \"Your own task\")");
  import_cmd->add_option("src", import->source_dir, "Directory holding NAME_{train,val,test}_{X,y}.npy")->required();
  import_cmd->add_option("--out", import->out_dir, "Dataset directory to write")->required();
  import_cmd->add_option("--name", import->name, "NAME, where SRC holds the files of several tasks");
  import_cmd->add_option("--vocab", import->vocab_file,
                         "File of the symbols, one per line (line k: id k-1); default: ids 0..V-1 shown as "
                         "\"0\"..\"V-1\", V = the largest id + 1");
  auto* answer_size = import_cmd->add_option(
      "--answer-size", "Score only the last N ids of y (e.g. N = Ly - 1 when y starts with a start token); "
                       "default: all of y")->transform(int_range(1, std::numeric_limits<int>::max()));
  auto* pad_id = import_cmd->add_option("--pad-id", "A padding id of the data: an X row of nothing but it is "
                                                    "refused (rmt itself needs no reserved id)")
      ->transform(int_range(0, std::numeric_limits<int>::max()));
  import_cmd->add_flag("--aligned", import->aligned,
                       "y[i] is the target at X's position i (X and y of one width; input X, target y) instead of "
                       "y written after X");
  import_cmd->add_flag("--force", import->force, "Overwrite a dataset already in --out");
  import_cmd->callback([=] {
    ImportRequest request = *import;
    if (answer_size->count()) request.answer_size = answer_size->as<int>();
    if (pad_id->count()) request.pad_id = pad_id->as<int>();
    const ImportResult r = import_dataset(request);
    const DatasetMeta& m = r.meta;
    fmt::print("imported task {} into {}: train {}, val {}, test {} samples; X [N, {}], y [N, {}]\n", m.task,
               request.out_dir, m.counts[0], m.counts[1], m.counts[2], m.len_x, m.len_y);
    if (r.vocab_inferred)
      fmt::print("vocabulary: {} ids, shown as \"0\"..\"{}\" (inferred from the largest id; --vocab FILE names "
                 "them)\n", m.vocab.size(), m.vocab.size() - 1);
    else
      fmt::print("vocabulary: {} ids from {}\n", m.vocab.size(), request.vocab_file);
    fmt::print("model input: {} ({} positions); scored: the last {} ids of y{}\n",
               m.stacked ? "X then y" : "X, target y (aligned)", m.input_length, m.answer_size,
               m.answer_size == m.len_y ? " (all of it)" : "");
    if (r.unscored_positions > 0)
      fmt::print("unscored: {} positions of y are -1 or -100 (written as -1): training and evaluation score the "
                 "others\n", r.unscored_positions);
    if (m.pad_id >= 0) fmt::print("padding id: {} ('{}')\n", m.pad_id, m.vocab[size_t(m.pad_id)]);
    for (const std::string& d : r.source_dtypes) fmt::print("converted to int64: {}\n", d);
    fmt::print("next: rmt data show {}; train with `data: {}` in the config\n", request.out_dir, request.out_dir);
  });
}

}  // namespace rmt::cli
