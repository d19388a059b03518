#include "apps/rmt/commands.h"
#include "lib/error.h"

namespace rmt::cli {
void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a model from a YAML config");
  cmd->allow_extras();
  cmd->callback([] { fail("rmt train is not implemented yet"); });
}
void add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Evaluate a trained run on a split");
  cmd->allow_extras();
  cmd->callback([] { fail("rmt eval is not implemented yet"); });
}
}  // namespace rmt::cli
