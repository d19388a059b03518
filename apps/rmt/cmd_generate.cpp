#include "apps/rmt/commands.h"
#include "lib/error.h"

namespace rmt::cli {
void add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate a dataset (copy, reverse, retrieval, sqeq)");
  cmd->allow_extras();
  cmd->callback([] { fail("rmt generate is not implemented yet"); });
}
}  // namespace rmt::cli
