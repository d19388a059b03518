// Catalogue of bad inputs (tests/catalogue.h), issue 58: a dataset's identity wherever finished
// runs are reused or pooled. A sweep over `data: {dir: ...}` reused a finished run after its
// dataset changed (generated data was checked, a user's was not); one dataset written as two
// paths gave two runs of one config; `rmt table` averaged runs on different data (a grid over
// data.dir or data.length) into one cell as if they were seeds.
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "lib/files/io.h"
#include "tests/catalogue.h"

namespace {

// {dir}/d and {dir}/c.yaml (copy_data_and_config), {dir}/s.yaml: a one-run sweep on data.dir
// {dir}/d, and that sweep run.
void finished_sweep_on_dir(const std::string& dir) {
  copy_data_and_config(dir);
  rmt::write_file_atomic(dir + "/s.yaml", "data: {dir: " + dir + "/d}\n"
                                          "base: {model: {kind: baseline, n_layer: 1, n_head: 1, d_head: 4, d_model: 4, "
                                          "d_inner: 8}, train: {batch_size: 4, max_steps: 2, eval_every: 2}}\n"
                                          "grid: {segments: [1]}\n");
  const std::string cmd = std::string(RMT_BINARY) + " sweep " + dir + "/s.yaml --runs-dir " + dir + "/runs >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("catalogue setup: rmt sweep failed");
}

// finished_sweep_on_dir, then {dir}/d made again from another seed: the same task and shapes,
// other samples.
void dataset_changed_under_sweep(const std::string& dir) {
  finished_sweep_on_dir(dir);
  const std::string cmd = std::string(RMT_BINARY) + " generate copy --length 4 --symbols 4 --train 40 --val 8 "
                          "--test 8 --seed 7 --out " + dir + "/d --force >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("catalogue setup: rmt generate failed");
}

// {dir}/d and a sweep whose grid names it twice, as "{dir}/d" and "{dir}/./d/".
void one_dataset_two_spellings(const std::string& dir) {
  copy_data_and_config(dir);
  rmt::write_file_atomic(dir + "/s.yaml", "data: {dir: " + dir + "/d}\n"
                                          "base: {model: {kind: baseline, n_layer: 1, n_head: 1, d_head: 4, d_model: 4, "
                                          "d_inner: 8}, train: {batch_size: 4, max_steps: 2}}\n"
                                          "grid: {data.dir: [" + dir + "/d, " + dir + "/./d/], segments: [1]}\n");
}

// {dir}/r.csv: results of one kind and segment count on two datasets (a grid over data.dir), and
// {dir}/l.csv: over data.length (the segment length differs), two seeds each.
void results_on_two_datasets(const std::string& dir) {
  const std::string header = "data.dir,model.kind,train.seed,segments,model.num_mem_tokens,model.mem_len,segment_length,"
                             "acc_teacher_forced,run_id,status\n";
  rmt::write_file_atomic(dir + "/r.csv", header + "a,rmt,1,2,4,0,6,0.9,r1,done\nb,rmt,1,2,4,0,6,0.1,r2,done\n"
                                                  "a,rmt,2,2,4,0,6,0.8,r3,done\nb,rmt,2,2,4,0,6,0.2,r4,done\n");
  rmt::write_file_atomic(dir + "/l.csv", "data.length,model.kind,train.seed,segments,model.num_mem_tokens,model.mem_len,"
                                         "segment_length,acc_teacher_forced,run_id,status\n"
                                         "12,xl,1,2,0,6,6,0.9,r1,done\n24,xl,1,2,0,6,12,0.3,r2,done\n");
}

}  // namespace

RMT_CATALOGUE({
    {"dataset identity", "sweep: data.dir changed under a finished run (was reused)", dataset_changed_under_sweep,
     "sweep {dir}/s.yaml --runs-dir {dir}/runs", 1, "sweep s: dataset {dir}/d changed since run"},
    {"dataset identity", "sweep --dry-run: data.dir changed under a finished run", dataset_changed_under_sweep,
     "sweep {dir}/s.yaml --runs-dir {dir}/runs --dry-run", 1, "that run's results are of other data"},
    {"dataset identity", "sweep --collect: data.dir changed under a finished run", dataset_changed_under_sweep,
     "sweep {dir}/s.yaml --runs-dir {dir}/runs --collect", 1, "changed since run"},
    {"dataset identity", "sweep: one dataset as two paths is one run (was two)", one_dataset_two_spellings,
     "sweep {dir}/s.yaml --runs-dir {dir}/runs --dry-run", 0, "sweep s: 1 runs in"},
    {"dataset identity", "table: runs on two datasets are two rows (were pooled as seeds)", results_on_two_datasets,
     "table {dir}/r.csv", 0, "Rows split by data.dir: runs of one cell differed in it"},
    {"dataset identity", "table: runs over data.length are two rows (were pooled)", results_on_two_datasets,
     "table {dir}/l.csv", 0, "Rows split by data.length, segment_length"},
});
