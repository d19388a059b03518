// Catalogue of bad inputs (tests/catalogue.h): output lost on a full device. stdout onto
// /dev/full fails at a write or only at the final flush; either way rmt must say so and exit 1
// (apps/rmt/main.cpp finish_stdout), never 0 with the output gone.
#include <filesystem>
#include <string>

#include "lib/files/io.h"
#include "tests/catalogue.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {

// Appended to a case's arguments: stdout to /dev/full, stderr to the pipe the catalogue reads.
// The catalogue appends " 2>&1" to every command line; the '#' turns that into a comment, so
// that stderr stays where the message can be read.
const std::string kStdoutFull = " 2>&1 >/dev/full #";

// {dir}/r.csv: a results.csv of one finished run.
void results_csv(const std::string& dir) {
  rmt::write_file_atomic(dir + "/r.csv", "model.kind,segments,model.num_mem_tokens,model.mem_len,acc_teacher_forced,"
                                         "status\nrmt,1,1,0,0.5,done\n");
}

// {dir}/run: a 2-step run of a tiny baseline on the copy dataset {dir}/d.
void trained_run(const std::string& dir) {
  copy_data_and_config(dir);
  Run r = rmt_run("train --config " + dir + "/c.yaml --out " + dir + "/run");
  REQUIRE_MESSAGE(r.status == 0, r.output);
}

const char* kNoSpace = "cannot write to standard output: No space left on device";

}  // namespace

RMT_CATALOGUE({
    {"full-device", "table: its table to a full device", results_csv, "table {dir}/r.csv" + kStdoutFull, 1, kNoSpace},
    {"full-device", "reproduce --list to a full device", nullptr,
     "reproduce --list --manifest " + std::string(RMT_SOURCE_DIR) + "/experiments/reproduce/reproduce.yaml" + kStdoutFull, 1, kNoSpace},
    {"full-device", "eval: its JSON to a full device", trained_run, "eval --run {dir}/run" + kStdoutFull, 1, kNoSpace},
    {"full-device", "data show: the samples to a full device", trained_run, "data show {dir}/d" + kStdoutFull, 1,
     kNoSpace},
    {"full-device", "--help to a full device", nullptr, "table --help" + kStdoutFull, 1, kNoSpace},
    {"full-device", "generate: its summary to a full device", nullptr,
     "generate copy --length 4 --symbols 4 --train 40 --val 8 --test 8 --out {dir}/d" + kStdoutFull, 1, kNoSpace},
});
