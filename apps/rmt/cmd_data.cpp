#include "apps/rmt/commands.h"
#include "lib/error.h"

namespace rmt::cli {
void add_data_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("data", "Show or check a dataset");
  cmd->allow_extras();
  cmd->callback([] { fail("rmt data is not implemented yet"); });
}
}  // namespace rmt::cli
