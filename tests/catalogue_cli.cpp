// Catalogue of bad command lines (tests/catalogue.h), for every subcommand. Two categories:
//   cli-usage (exit 2): the command line has the wrong shape: an unknown subcommand or option, a
//     missing or extra argument, an option without its value. The message names it (with the
//     closest valid name when there is one) and points at `rmt SUBCOMMAND --help`.
//   cli-value (exit 1): the shape is right but a value is wrong: not a number, out of its range,
//     not one of the choices, a file that does not exist, an output path that cannot be written,
//     a size that does not fit in memory. The message names the option and what it accepts.
// Plus: --help of every subcommand and --version exit 0; plot without gnuplot is a clear error.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/catalogue.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A regular file where a directory is needed ({dir}/file/...): unwritable for every user,
// root included (a chmod'ed directory is not, for root).
void a_file(const std::string& dir) { write(dir + "/file", "not a directory\n"); }

// Stand-ins for step-dump's --checkpoint/--input/--target: the option checks run before any is read.
void step_dump_files(const std::string& dir) {
  for (const char* f : {"c.safetensors", "i.npy", "t.npy"}) write(dir + "/" + f, "x");
  a_file(dir);
}
const std::string kStepDump =
    "step-dump --checkpoint {dir}/c.safetensors --input {dir}/i.npy --target {dir}/t.npy --answer-size 1 ";

// A sweep's results.csv with one finished run.
void results_csv(const std::string& dir) {
  write(dir + "/results.csv",
        "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,segment_length,"
        "acc_teacher_forced,acc_free_running,solve_rate,loss,run_id,status,steps,wall_time_s,git_commit,threads,error\n"
        "baseline,1,0,0,all,1,12,0.273438,,,1.78474,baseline-seg1-eb060fd7,done,5,0.1,abc,1,\n");
  write(dir + "/paper.yaml", "sw: {rows: [1\n");
  a_file(dir);
}

void sweep_file(const std::string& dir) {
  write(dir + "/sweep.yaml",
        "data: {task: copy, length: 4, symbols: 4, train: 200, val: 16, test: 16, seed: 0}\n"
        "base: {model: {n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16}}\n"
        "grid: {model.kind: [baseline], segments: [1]}\n");
  a_file(dir);
}

}  // namespace

RMT_CATALOGUE({
    // ---- cli-usage: exit 2 ----------------------------------------------------------------
    {"cli-usage", "no subcommand", nullptr, "", 2,
     "'rmt' needs a subcommand: generate, data, train, eval, step-dump, sweep, table, plot, bench, attn, sample, reproduce; see 'rmt --help'"},
    {"cli-usage", "unknown subcommand lists the valid ones", nullptr, "frobnicate", 2,
     "unknown subcommand 'frobnicate' (rmt has: generate, data, train"},
    {"cli-usage", "misspelt subcommand names the closest", nullptr, "trian --out x", 2,
     "unknown subcommand 'trian' (did you mean 'train'?); see 'rmt --help'"},
    {"cli-usage", "unknown top-level option", nullptr, "--verbose train", 2, "unknown option --verbose; see 'rmt --help'"},
    {"cli-usage", "data without show/check/import", nullptr, "data", 2,
     "'rmt data' needs a subcommand: show, check, import"},
    {"cli-usage", "data: misspelt subcommand", nullptr, "data chek {dir}", 2,
     "unknown subcommand 'chek' (did you mean 'check'?); see 'rmt data --help'"},
    {"cli-usage", "generate: task missing", nullptr, "generate --out {dir}/d", 2,
     "missing argument task (Task or preset name); see 'rmt generate --help'"},
    {"cli-usage", "generate: --out missing", nullptr, "generate copy", 2,
     "missing required option --out; see 'rmt generate --help'"},
    {"cli-usage", "generate: misspelt option", nullptr, "generate copy --out {dir}/d --sed 3", 2,
     "unknown option --sed (did you mean --seed?); see 'rmt generate --help'"},
    {"cli-usage", "data show: extra argument", nullptr, "data show {dir} {dir}/other", 2,
     "/other; see 'rmt data show --help'"},
    {"cli-usage", "train: unknown option reported before the missing --out", nullptr, "train --outt {dir}/r", 2,
     "unknown option --outt (did you mean --out?); see 'rmt train --help'"},
    {"cli-usage", "train: --out without its value", nullptr, "train --out", 2, "--out needs a value; see 'rmt train --help'"},
    {"cli-usage", "eval: --run missing", nullptr, "eval --split test", 2, "missing argument RUN (or --run); see 'rmt eval --help'"},
    {"cli-usage", "eval: --run twice", nullptr, "eval --run {dir} --run {dir}", 2,
     "--run given 2 times; give it once; see 'rmt eval --help'"},
    {"cli-usage", "step-dump: --checkpoint missing", nullptr, "step-dump --input a --target b --answer-size 1 --out o", 2,
     "missing required option --checkpoint; see 'rmt step-dump --help'"},
    {"cli-usage", "sweep: file missing", nullptr, "sweep -j 2", 2, "missing argument file (Sweep file); see 'rmt sweep --help'"},
    {"cli-usage", "sweep: short option unknown", sweep_file, "sweep {dir}/sweep.yaml -k 2", 2,
     "unknown option -k; see 'rmt sweep --help'"},
    {"cli-usage", "table: misspelt option", results_csv, "table {dir}/results.csv --formt md", 2,
     "unknown option --formt (did you mean --format?); see 'rmt table --help'"},
    {"cli-usage", "plot: --out missing", results_csv, "plot {dir}/results.csv", 2,
     "missing required option --out; see 'rmt plot --help'"},
    {"cli-usage", "attn: misspelt option", nullptr, "attn --run {dir} --layr 1 --dump {dir}/a.json", 2,
     "unknown option --layr (did you mean --layer?); see 'rmt attn --help'"},
    {"cli-usage", "attn: neither --out nor --dump", nullptr, "attn --run {dir}", 2,
     "missing required option --out FILE.png|FILE.svg or --dump FILE.json; see 'rmt attn --help'"},
    {"cli-usage", "bench: misspelt option", nullptr, "bench --rep 3", 2,
     "unknown option --rep (did you mean --reps?); see 'rmt bench --help'"},

    // ---- cli-value: exit 1 ----------------------------------------------------------------
    {"cli-value", "generate: size not a number", nullptr, "generate copy --out {dir}/d --train 1e3", 1,
     "--train must be an integer, at least 1 (got '1e3')"},
    {"cli-value", "generate: negative size", nullptr, "generate copy --out {dir}/d --val -5", 1,
     "--val must be at least 1 (got -5)"},
    {"cli-value", "generate: size beyond int64", nullptr, "generate copy --out {dir}/d --test 99999999999999999999", 1,
     "--test must be at most 9223372036854775807 (got 99999999999999999999)"},
    {"cli-value", "generate: --length beyond int", nullptr, "generate copy --out {dir}/d --length 3000000000", 1,
     "--length must be from 1 to 100000 (got 3000000000)"},
    {"cli-value", "data show: -n negative", nullptr, "data show {dir} -n -1", 1, "-n must be at least 0 (got -1)"},
    {"cli-value", "data show: -n beyond int", nullptr, "data show {dir} -n 10000000000", 1,
     "-n must be at most 2147483647 (got 10000000000)"},
    {"cli-value", "eval: unknown split, closest named", nullptr, "eval --run {dir} --split tset", 1,
     "--split must be one of train, val, test (got 'tset'; did you mean 'test'?)"},
    {"cli-value", "train: --config does not exist", nullptr, "train --config {dir}/nope.yaml --out {dir}/r", 1,
     "nope.yaml: no such file"},
    {"cli-value", "train: --out under a file", a_file, "train --out {dir}/file/run", 1, "/file is not a directory"},
    {"cli-value", "eval: --run does not exist", nullptr, "eval --run {dir}/nope", 1, "nope: no such directory"},
    {"cli-value", "eval: --samples 0", nullptr, "eval --run {dir} --samples 0", 1, "--samples must be at least 1 (got 0)"},
    {"cli-value", "eval: --segments 0", nullptr, "eval --run {dir} --segments 0", 1, "--segments must be at least 1 (got 0)"},
    {"cli-value", "eval: --threads not a number", nullptr, "eval --run {dir} --threads many", 1,
     "--threads must be an integer from 0 to 1024 (got 'many')"},
    {"cli-value", "step-dump: --answer-size beyond int", step_dump_files,
     "step-dump --checkpoint {dir}/c.safetensors --input {dir}/i.npy --target {dir}/t.npy --answer-size 1e10 --out {dir}/o",
     1, "--answer-size must be an integer (got '1e10')"},
    {"cli-value", "eval: --batch-size not a number", nullptr, "eval --run {dir} --batch-size eight", 1,
     "--batch-size must be an integer, at least 1 (got 'eight')"},
    {"cli-value", "step-dump: --bptt neither all nor an integer", step_dump_files, kStepDump + "--bptt 3x --out {dir}/o", 1,
     "--bptt must be 'all' or an integer, at least 0 (got '3x')"},
    {"cli-value", "step-dump: --lr 0", step_dump_files, kStepDump + "--lr 0 --out {dir}/o", 1,
     "--lr must be greater than 0 (got 0)"},
    {"cli-value", "step-dump: --clip nan", step_dump_files, kStepDump + "--clip nan --out {dir}/o", 1,
     "--clip must be a finite number at least 0 (got 'nan')"},
    {"cli-value", "step-dump: --out under a file", step_dump_files, kStepDump + "--out {dir}/file/o", 1,
     "/file is not a directory"},
    {"cli-value", "step-dump: --input missing", step_dump_files,
     "step-dump --checkpoint {dir}/c.safetensors --input {dir}/none.npy --target {dir}/t.npy --answer-size 1 --out {dir}/o",
     1, "none.npy: no such file"},
    {"cli-value", "sweep: -j 0", sweep_file, "sweep {dir}/sweep.yaml -j 0", 1, "--jobs must be from 1 to 1024 (got 0)"},
    {"cli-value", "sweep: -j beyond int", sweep_file, "sweep {dir}/sweep.yaml -j 99999999999", 1,
     "--jobs must be from 1 to 1024 (got 99999999999)"},
    {"cli-value", "sweep: unknown --emit", sweep_file, "sweep {dir}/sweep.yaml --emit slrum", 1,
     "--emit must be one of commands, slurm (got 'slrum'; did you mean 'slurm'?)"},
    {"cli-value", "sweep: --runs-dir under a file", sweep_file, "sweep {dir}/sweep.yaml --runs-dir {dir}/file/runs", 1,
     "/file is not a directory"},
    {"cli-value", "sweep: the file does not exist", nullptr, "sweep {dir}/nope.yaml", 1, "nope.yaml: no such file"},
    {"cli-value", "sweep: a directory as the sweep file", nullptr, "sweep {dir}", 1, ": is a directory, expected a file"},
    {"cli-value", "generate: empty --out", nullptr, "generate copy --out ''", 1, "--out: empty value ''; give one"},
    {"cli-value", "train: empty --out", nullptr, "train --out ''", 1, "--out: empty value ''; give one"},
    {"cli-value", "table: unknown --format", results_csv, "table {dir}/results.csv --format html", 1,
     "--format must be one of md, csv, latex (got 'html')"},
    {"cli-value", "table: --metric not a column", results_csv, "table {dir}/results.csv --metric accuracy", 1,
     "--metric accuracy: "},
    {"cli-value", "table: --metric a text column (was an internal error)", results_csv,
     "table {dir}/results.csv --metric run_id", 1, "results.csv: line 2: run_id 'baseline-seg1-eb060fd7' is not a finite number"},
    {"cli-value", "table: --by not a column", results_csv, "table {dir}/results.csv --by lr", 1,
     "results.csv has no such column (columns: model.kind, segments"},
    {"cli-value", "table: --paper malformed YAML (was an internal error)", results_csv,
     "table {dir}/results.csv --paper {dir}/paper.yaml", 1, "paper.yaml: malformed YAML at line 2"},
    {"cli-value", "table: a directory instead of results.csv", nullptr, "table {dir}", 1,
     "is a directory; give its results.csv"},
    {"cli-value", "plot: --out under a file", results_csv, "plot {dir}/results.csv --out {dir}/file/fig.svg", 1,
     "file/fig.svg: "},
    {"cli-value", "plot: --out a directory", results_csv, "plot {dir}/results.csv --out {dir}", 1,
     "is a directory, expected a file name"},
    {"cli-value", "attn: --threads huge", nullptr, "attn --run {dir} --threads 100000 --dump {dir}/a.json", 1,
     "--threads must be from 0 to 1024 (got 100000)"},
    {"cli-value", "attn: --layer not a number", nullptr, "attn --run {dir} --layer first --dump {dir}/a.json", 1,
     "--layer must be an integer (got 'first')"},
    {"cli-value", "attn: unknown split", nullptr, "attn --run {dir} --split dev --dump {dir}/a.json", 1,
     "--split must be one of train, val, test (got 'dev')"},
    {"cli-value", "bench: --reps 0", nullptr, "bench --reps 0", 1, "--reps must be from 1 to 100000 (got 0)"},
    {"cli-value", "bench: --warmup negative", nullptr, "bench --warmup -1", 1, "--warmup must be from 0 to 100000 (got -1)"},
    {"cli-value", "bench: --threads negative", nullptr, "bench --threads -1", 1, "--threads must be from 0 to 1024 (got -1)"},
    {"cli-value", "bench: unknown --model", nullptr, "bench --model transformer", 1,
     "--model must be one of baseline, xl, rmt, lm_baseline, lm_xl, lm_rmt, copy120_baseline, copy120_xl, copy120_rmt, repro_copy_rmt, repro_retrieval_rmt, deltanet, gated_deltanet, seg64_deltanet, seg64_gated_deltanet, seg256_deltanet, seg256_gated_deltanet, copy, lm, copy120, repro, delta, all (got 'transformer')"},
    {"cli-value", "bench: --gemm-size too large for memory", nullptr, "bench --peak-only --gemm-size 100000", 1,
     "--gemm-size must be from 16 to 16384 (got 100000)"},
    {"cli-value", "bench: --peak-gflops not finite", nullptr, "bench --peak-gflops inf", 1,
     "--peak-gflops must be a finite number greater than 0 (got 'inf')"},
});

TEST_CASE("cli: --help of every subcommand and --version exit 0 and print to stdout") {
  for (const char* cmd : {"", "generate", "data", "data show", "data check", "train", "eval", "step-dump", "sweep",
                          "table", "plot", "bench", "attn", "sample"}) {
    for (const char* flag : {"--help", "-h"}) {
      Run r = rmt_run(std::string(cmd) + " " + flag, /*stdout_only=*/true);
      CAPTURE(cmd);
      CHECK(r.status == 0);
      CHECK(r.output.find("Usage:") != std::string::npos);
      CHECK(r.output.find("rmt: error") == std::string::npos);
    }
  }
  // --help wins over an unknown option or a missing required one.
  Run r = rmt_run("train --bogus --help", true);
  CHECK(r.status == 0);
  CHECK(r.output.find("--config") != std::string::npos);
  Run v = rmt_run("--version", true);
  CHECK(v.status == 0);
  CHECK(v.output.rfind("rmt ", 0) == 0);
  CHECK(v.output.find("commit: ") != std::string::npos);
}

TEST_CASE("cli: errors are one line on stderr, nothing on stdout") {
  for (const char* args : {"trian", "generate copy --seed -1 --out /tmp/rmt_unused", "bench --rep 3"}) {
    CAPTURE(args);
    Run out = rmt_run(args, /*stdout_only=*/true);
    CHECK(out.output.empty());
    Run both = rmt_run(args);
    CHECK(both.output.rfind("rmt: error: ", 0) == 0);
    CHECK(both.output.find('\n') == both.output.size() - 1);
  }
}

TEST_CASE("cli: plot without gnuplot says how to install it (exit 1)") {
  std::string dir = fresh_tmp("rmt_catalogue_cli", "no_gnuplot");
  fs::create_directories(dir + "/bin");
  results_csv(dir);
  // A PATH without gnuplot; /bin/sh (used to look for it) needs no PATH.
  std::string cmd = "PATH=" + dir + "/bin " + RMT_BINARY + " plot " + dir + "/results.csv --out " + dir +
                    "/fig.svg 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  CAPTURE(out);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(out.find("rmt: error: gnuplot is not installed") != std::string::npos);
  CHECK(!fs::exists(dir + "/fig.svg"));
  fs::remove_all(dir);
}
