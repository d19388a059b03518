#pragma once
// The tests of `rmt reproduce` (tests/test_reproduce_*.cpp): a tiny project in a fresh directory,
// its sweep (kReproSweep), the paper's numbers for it (kPaper), a manifest over it
// (manifest_text) and the report's templates beside it.
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cli.h"

namespace fs = std::filesystem;

inline void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A tiny sweep (copy of 4 symbols, one layer of d_model 16, 30 steps) and a manifest over it.
inline const char* kReproSweep = R"Y(data: {task: copy, length: 4, symbols: 10, train: 200, val: 50, test: 50, seed: 0}
base:
  bptt: all
  model: {n_layer: 1, n_head: 2, d_head: 8, d_model: 16, d_inner: 32, dropout: 0.0, mem_init: normal}
  train: {batch_size: 16, lr: 1.0e-3, schedule: constant, warmup_steps: 0, clip: 1.0, max_steps: 30,
          eval_every: 15, log_every: 15, curriculum: 3, curriculum_advance: mastery, target: 0.01,
          target_evals: 1}
grid:
  - {model.kind: [baseline], segments: [1, 3], train.seed: [1]}
  - {model.kind: [xl, rmt], segments: [3], train.seed: [1, 2]}
derive: {model.num_mem_tokens: segment_length, model.mem_len: segment_length}
)Y";

inline const char* kPaper = R"Y(tiny:
  task: copy 4
  seq_len: 12
  rows:
    baseline: {1: 1.00, 3: 0.12}
    "rmt (mem = seg len)": {3: 1.00}
)Y";

inline std::string manifest_text(const std::string& extra_item = "") {
  return std::string(R"Y(paper: paper.yaml
items:
  tiny:
    kind: sweep
    title: "a tiny copy"
    paper_says: "RMT solves copy"
    notes: "{{solved}} runs met the stopping rule; the baseline got {{test model=baseline segments=1 digits=3}}."
    sweep: tiny.yaml
    paper_section: tiny
    metrics: [acc_teacher_forced, acc_free_running]
    claims:
      - {text: "the baseline is below 0.99", model: baseline, segments: [1, 3], max: 0.99}
      - {text: "RMT is at 1.5 or more", model: rmt, segments: [3], min: 1.5}
      - {text: "the baseline is at 1.5 or more", model: baseline, segments: [1], min: 1.5}
  maps:
    kind: attention
    title: "attention"
    paper_says: "RMT writes into memory"
    notes: "RMT's write slots take token i in {{test model=rmt segments=3 digits=3}} of the slots."
    from: tiny
    samples: 5
    measures: [write_in_order, rewrite_mass, cache_source_reads]
    claims:
      - {text: "RMT's write slots put a share of at least 0 on the read memory", model: rmt, segments: [3], metric: rewrite_mass, min: 0}
      - {text: "RMT writes in order in more than all its slots", model: rmt, segments: [3], min: 1.01}
      - {text: "Tr-XL reads its cache along straight lines", model: xl, segments: [3], metric: cache_source_reads, min: 0}
    runs:
      - {model: rmt, segments: 3, seed: 1}
      - {model: xl, segments: 3}
  longer:
    kind: length
    title: "length"
    paper_says: "none"
    from: tiny
    runs: [{model: rmt, segments: 3, seed: 1}, {model: xl, segments: 3, seed: 2}]
    lengths: [4, 8]
    claims:
      - {text: "RMT is below 0.99 at 6 segments", model: rmt, segments: [6], max: 0.99}
)Y") + extra_item;
}

// The report's templates (experiments/reproduce/report_templates.md) beside a test's manifest.
inline void copy_report_templates(const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy_file(fs::path(RMT_SOURCE_DIR) / "experiments/reproduce/report_templates.md", dir / "report_templates.md",
                fs::copy_options::overwrite_existing);
}

inline fs::path tiny_project(const std::string& name, const std::string& manifest) {
  fs::path dir = fresh_tmp("rmt_reproduce", name);
  copy_report_templates(dir);
  write(dir / "tiny.yaml", kReproSweep);
  write(dir / "paper.yaml", kPaper);
  write(dir / "m.yaml", manifest);
  return dir;
}
