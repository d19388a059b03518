#pragma once
// Each subcommand lives in its own apps/rmt/cmd_*.cpp: it declares its options on the CLI11
// subcommand and sets the callback that runs it. Only parsing and printing happen in apps/;
// the work itself is in lib/ and tasks/.
#include <CLI/CLI.hpp>

namespace rmt::cli {

void add_generate_command(CLI::App& app);
void add_data_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_train_pack_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_step_dump_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_report_commands(CLI::App& app);  // rmt table, rmt plot
void add_bench_command(CLI::App& app);
void add_attn_command(CLI::App& app);    // rmt attn (attention maps)
void add_reproduce_command(CLI::App& app);  // rmt reproduce (REPORT.md)
void add_sample_command(CLI::App& app);     // rmt sample (text from a language model)

}  // namespace rmt::cli
