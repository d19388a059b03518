// Catalogue of bad inputs (tests/catalogue.h): the paper YAML of `rmt table --paper` / `rmt plot
// --paper` (experiments/paper_results.yaml): a section's own keys (task, seq_len,
// segment_lengths) and its row labels. The cases on values and YAML syntax are in
// catalogue_readers.cpp.
#include <filesystem>
#include <string>

#include "lib/files/io.h"
#include "tests/catalogue.h"

namespace fs = std::filesystem;

namespace {

const std::string kHeader =
    "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,segment_length,"
    "acc_teacher_forced,acc_free_running,solve_rate,loss,run_id,status,steps,wall_time_s,git_commit,threads,error\n";
const std::string kRows = "baseline,1,0,0,all,1,18,1.0,0.9,,0.1,b1,done,10,1.0,abc,1,\n"
                          "rmt,3,6,0,all,1,6,1.0,0.9,,0.1,r1,done,10,1.0,abc,1,\n";

// {dir}/quick_copy/results.csv that reads well, and {dir}/paper.yaml holding `text`.
std::function<void(const std::string&)> paper(std::string text) {
  return [text](const std::string& dir) {
    fs::create_directories(dir + "/quick_copy");
    rmt::write_file_atomic(dir + "/quick_copy/results.csv", kHeader + kRows);
    rmt::write_file_atomic(dir + "/paper.yaml", text);
  };
}
const char* kTable = "table {dir}/quick_copy/results.csv --paper {dir}/paper.yaml";
const char* kTableCsv = "table {dir}/quick_copy/results.csv --paper {dir}/paper.yaml --format csv";
const char* kPlot = "plot {dir}/quick_copy/results.csv --paper {dir}/paper.yaml --out {dir}/fig.svg";

}  // namespace

RMT_CATALOGUE({
    {"paper.yaml", "misspelt section key",
     paper("quick_copy:\n  seqlen: 72\n  rows:\n    baseline: {1: 1.0}\n"), kTable, 1,
     "paper.yaml: line 2: quick_copy: unknown key 'seqlen' (a section holds task, seq_len, segment_lengths, rows)"},
    {"paper.yaml", "no segment length for a row's segment count (no seq_len)",
     paper("quick_copy:\n  rows:\n    baseline: {1: 1.0, 3: 0.12}\n"), kTable, 1,
     "paper.yaml: line 3: quick_copy.rows.baseline: 1 segments has no segment length: give the section's seq_len"},
    {"paper.yaml", "segment_lengths missing a count the rows use",
     paper("quick_copy:\n  segment_lengths: {3: 24}\n  rows:\n    rmt (mem = seg len): {3: 1.0, 6: 1.0}\n"), kTableCsv,
     1, "quick_copy.rows.rmt (mem = seg len): 6 segments has no segment length"},
    {"paper.yaml", "more segments than seq_len positions",
     paper("quick_copy:\n  seq_len: 4\n  rows:\n    baseline: {1: 1.0, 6: 0.1}\n"), kTable, 1,
     "quick_copy.rows.baseline: 6 segments of the paper's 4 input positions (seq_len) leave empty segments"},
    {"paper.yaml", "seq_len 0", paper("quick_copy: {seq_len: 0, rows: {baseline: {1: 1.0}}}\n"), kTable, 1,
     "quick_copy.seq_len: '0' is not a number of input positions (an integer >= 1)"},
    {"paper.yaml", "seq_len not a number", paper("quick_copy: {seq_len: long, rows: {baseline: {1: 1.0}}}\n"), kPlot, 1,
     "quick_copy.seq_len: 'long' is not a number of input positions (an integer >= 1)"},
    {"paper.yaml", "segment length negative",
     paper("quick_copy: {segment_lengths: {1: -72}, rows: {baseline: {1: 1.0}}}\n"), kTable, 1,
     "quick_copy.segment_lengths: '-72' is not a segment length for 1 segments (an integer >= 1)"},
    {"paper.yaml", "segment_lengths a list", paper("quick_copy: {segment_lengths: [72, 24], rows: {baseline: {1: 1.0}}}\n"),
     kTable, 1, "quick_copy.segment_lengths: expected a non-empty mapping {segments: segment length}"},
    {"paper.yaml", "task a mapping", paper("quick_copy: {task: {name: copy}, seq_len: 72, rows: {baseline: {1: 1.0}}}\n"),
     kTable, 1, "quick_copy.task: expected the paper's task as text, e.g. task: copy 24"},
    {"paper.yaml", "row label not a model kind",
     paper("quick_copy: {seq_len: 72, rows: {\"recurrent memory\": {3: 1.0}}}\n"), kTable, 1,
     "quick_copy.rows.recurrent memory: a row label is a model kind (baseline, mt, xl, rmt, xl_rmt, armt, deltanet, gated_deltanet), then its memory "
     "in parentheses"},
    {"paper.yaml", "row label's memory not in parentheses",
     paper("quick_copy: {seq_len: 72, rows: {\"rmt mem 6\": {3: 1.0}}}\n"), kTable, 1,
     "quick_copy.rows.rmt mem 6: a row label is a model kind"},
    {"paper.yaml", "section without rows", paper("quick_copy: {task: copy 24, seq_len: 72}\n"), kTable, 1,
     "quick_copy: expected 'rows:' mapping model labels to {segments: value}"},
});
