// Catalogue of bad inputs (tests/catalogue.h) for `rmt reproduce --report-only` (issue 58): a
// reading that names what the item does not have, and results on disk that are not the item's
// (an earlier config's, or files derived from results that are gone). Nothing trains. Results
// that are not the item's are no error: the item is reported as not run, and the log line that
// says why is the message (status 0).
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/catalogue.h"

namespace {

namespace fs = std::filesystem;

// {dir}/m.yaml = a manifest of `items` (YAML, indented by 2) beside its paper file, the report's
// templates and s.yaml, a sweep of one baseline run (1 segment, seed 1).
void project(const std::string& dir, const std::string& items) {
  std::ofstream(dir + "/paper.yaml") << "x:\n  seq_len: 4\n  rows:\n    baseline: {1: 1.0}\n";
  std::ofstream(dir + "/s.yaml") << "data: {task: copy, length: 4, train: 20, val: 5, test: 5}\n"
                                    "base: {}\ngrid:\n  - {model.kind: [baseline], segments: [1], train.seed: [1]}\n";
  fs::copy_file(fs::path(RMT_SOURCE_DIR) / "experiments/reproduce/report_templates.md",
                fs::path(dir) / "report_templates.md");
  std::ofstream(dir + "/m.yaml") << "paper: paper.yaml\nitems:\n" << items;
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

const std::string kReportOnly = "reproduce --manifest {dir}/m.yaml --runs-dir {dir}/r --out {dir}/o --report-only";

const std::string kSweep = "  a:\n    kind: sweep\n    title: t\n    paper_says: p\n    sweep: s.yaml\n"
                           "    metrics: [acc_teacher_forced]\n";

// A bench item at 1 thread, 4 layers x 1024 segments, batch 8, 3 reps (the defaults).
const std::string kBench = "  a:\n    kind: bench\n    title: t\n    paper_says: p\n    beyond_the_paper: true\n"
                           "    bench: diagonal\n    threads: [1]\n";

// results.json as the bench item writes it, timed at `threads` threads with `layers` layers.
std::string bench_results(int threads, int layers) {
  return "{\"bench\": \"diagonal\", \"git_commit\": \"abc\", \"cpu_model\": \"cpu\", \"vector_extensions\": \"avx2\", "
         "\"compiler\": \"g++\", \"build_flags\": \"-O3\", \"gemm\": \"eigen\", \"timings\": [{\"threads\": " +
         std::to_string(threads) + ", \"layers\": " + std::to_string(layers) +
         ", \"segments\": 1024, \"batch\": 8, \"reps\": 3, \"segment_length\": 16, \"d_model\": 64, "
         "\"sequential_tokens_per_s\": 100, \"diagonal_tokens_per_s\": 200, \"speedup\": 2.0, \"identical\": true}]}\n";
}

}  // namespace

RMT_CATALOGUE({
    // ---- a placeholder's argument that names nothing of the item (was counted as nothing) ----
    {"reproduce", "reading of a model the item does not train",
     [](const std::string& d) { project(d, kSweep + "    notes: \"{{solved model=xl}} solved\"\n"); }, kReportOnly, 1,
     "items.a.notes: {{solved model=xl}}: model=xl names nothing of the item (its models: baseline)"},
    {"reproduce", "reading of a segment count the item does not train",
     [](const std::string& d) { project(d, kSweep + "    notes: \"{{test model=baseline segments=1,5}}\"\n"); },
     kReportOnly, 1, "segments=5 names nothing of the item (its segment counts: 1)"},
    {"reproduce", "reading of a seed the item does not train",
     [](const std::string& d) { project(d, kSweep + "    notes: \"{{test model=baseline segments=1 seed=9}}\"\n"); },
     kReportOnly, 1, "seed=9 names nothing of the item (its seeds: 1)"},
    {"reproduce", "reading of a metric the item does not tabulate",
     [](const std::string& d) {
       project(d, kSweep + "    notes: \"{{test_mean model=baseline segments=1 metric=exact_match}}\"\n");
     },
     kReportOnly, 1, "metric=exact_match names nothing of the item (its metrics: acc_teacher_forced)"},
    // ---- results on disk that are not the item's: reported as not run ------------------------
    {"reproduce", "bench results timed at other thread counts (were reported as the item's)",
     [](const std::string& d) { project(d, kBench), write(d + "/o/a/results.json", bench_results(2, 4)); }, kReportOnly,
     0, "a: {dir}/o/a/results.json holds the results of an earlier config (at threads 2, not 1); not reported"},
    {"reproduce", "bench results of another shape (were reported as the item's)",
     [](const std::string& d) { project(d, kBench), write(d + "/o/a/results.json", bench_results(1, 2)); }, kReportOnly,
     0, "(2 layers x 1024 segments, batch 8, 3 reps; the item times 4 x 1024, batch 8, 3 reps); not reported"},
    {"reproduce", "bench results.json gone, its table and checks left (were reported)",
     [](const std::string& d) {
       project(d, kBench);
       write(d + "/o/a/table.md", "| threads |\n");
       write(d + "/o/a/checks.json", "{\"holding\":1,\"total\":1}\n");
     },
     kReportOnly, 0,
     "a: {dir}/o/a/results.json is not there: table.md, checks.json (derived from it by an earlier report) not reported"},
    {"reproduce", "checks.json holding garbage without results (was \"7 of 2 checks hold\")",
     [](const std::string& d) { project(d, kBench), write(d + "/o/a/checks.json", "{\"holding\":7,\"total\":2}\n"); },
     kReportOnly, 0, "a: {dir}/o/a/results.json is not there: checks.json (derived from it by an earlier report)"},
    {"reproduce", "checks.json truncated without results (was an error)",
     [](const std::string& d) { project(d, kBench), write(d + "/o/a/checks.json", "{\"holding\":1,\"tot"); },
     kReportOnly, 0, "a: {dir}/o/a/results.json is not there: checks.json (derived from it by an earlier report)"},
    {"reproduce", "attention results of runs its sweep does not plan (were reported as the item's)",
     [](const std::string& d) {
       project(d, kSweep + "  b:\n    kind: attention\n    title: t\n    paper_says: p\n    from: a\n    samples: 5\n"
                           "    measures: [write_in_order]\n    runs: [{model: baseline, segments: 1}]\n");
       write(d + "/o/b/results.csv",
             "run_id,model.kind,segments,model.num_mem_tokens,model.mem_len,train.seed,segment_length,samples,"
             "write_in_order,status\nbaseline-seg1-seed1-00000000,baseline,1,0,0,1,12,5,0.5,done\n");
     },
     kReportOnly, 0,
     "b: {dir}/o/b/results.csv holds the results of an earlier config (run baseline-seg1-seed1-00000000 is none of "
     "the runs of its cells in a); not reported"},
    {"reproduce", "length results at a length the item does not give (were reported as the item's)",
     [](const std::string& d) {
       project(d, kSweep + "  b:\n    kind: length\n    title: t\n    paper_says: p\n    from: a\n    runs: all\n"
                           "    lengths: [8]\n");
       write(d + "/o/b/results.csv",
             "model.kind,segments,model.num_mem_tokens,model.mem_len,train.seed,segment_length,eval_length,"
             "trained_segments,acc_teacher_forced,acc_free_running,eval_seconds,status\n"
             "baseline,2,0,0,1,12,16,1,0.5,,1.0,done\n");
     },
     kReportOnly, 0,
     "b: {dir}/o/b/results.csv holds the results of an earlier config (length 16 is not one of the item's lengths)"},
    {"reproduce", "length results of runs its sweep's results do not hold (were reported as the item's)",
     [](const std::string& d) {
       project(d, kSweep + "  b:\n    kind: length\n    title: t\n    paper_says: p\n    from: a\n    runs: all\n"
                           "    lengths: [8]\n");
       write(d + "/o/b/results.csv",
             "model.kind,segments,model.num_mem_tokens,model.mem_len,train.seed,segment_length,eval_length,"
             "trained_segments,acc_teacher_forced,acc_free_running,eval_seconds,status\n"
             "baseline,1,0,0,1,12,8,1,0.5,,1.0,done\n");
     },
     kReportOnly, 0,
     "(baseline at 1 segments, seed 1 is not a finished run of a's results, {dir}/o/a/results.csv); not reported"},
});
