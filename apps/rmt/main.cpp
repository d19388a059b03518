// rmt: research toolkit for memory-augmented transformers. Entry point: builds the CLI from the
// subcommands in cmd_*.cpp and turns errors into a message and a non-zero exit status.
#include <omp.h>

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "apps/rmt/commands.h"
#include "build_info.h"
#include "lib/backend.h"
#include "lib/error.h"

static std::string version_text() {
  return fmt::format(
      "rmt {}\ncommit: {}\ncompiler: {}\nopenmp threads: {}\ngemm: {}\ncuda: {}\n", RMT_VERSION,
      RMT_GIT_COMMIT,
#if defined(__clang__)
      "clang " __clang_version__,
#elif defined(__GNUC__)
      "g++ " __VERSION__,
#else
      "unknown",
#endif
      omp_get_max_threads(), rmt::cpu_gemm_library(),
#ifdef RMT_WITH_CUDA
      "yes"
#else
      "no (CPU backend only)"
#endif
  );
}

int main(int argc, char** argv) {
  CLI::App app{"rmt: train and evaluate memory-augmented transformers (Transformer-XL, RMT)\n"
               "on algorithmic tasks, and reproduce the RMT paper's results."};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text(), "Print version, commit, compiler, threads, CUDA");
  rmt::cli::add_generate_command(app);
  rmt::cli::add_data_command(app);
  rmt::cli::add_train_command(app);
  rmt::cli::add_eval_command(app);
  rmt::cli::add_step_dump_command(app);
  rmt::cli::add_sweep_command(app);
  rmt::cli::add_report_commands(app);
  rmt::cli::add_bench_command(app);
  rmt::cli::add_attn_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const rmt::Error& e) {
    std::fprintf(stderr, "rmt: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rmt: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
