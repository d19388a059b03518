// Bad inputs of rmt bench's language-model workloads and --list.
#include <fstream>
#include <string>

#include "tests/catalogue.h"

RMT_CATALOGUE({
    {"cli-value", "bench: a language model kind bench does not have", nullptr, "bench --model lm_mt", 1,
     "--model must be one of baseline, xl, rmt, lm_baseline, lm_xl, lm_rmt, copy120_baseline, copy120_xl, copy120_rmt, repro_copy_rmt, repro_retrieval_rmt, deltanet, gated_deltanet, seg64_deltanet, seg64_gated_deltanet, seg256_deltanet, seg256_gated_deltanet, copy, lm, copy120, repro, delta, all (got 'lm_mt'; did you mean 'lm_rmt'?)"},
    {"cli-value", "bench --list: unknown --model", nullptr, "bench --list --model enwik8", 1,
     "--model must be one of baseline, xl, rmt, lm_baseline, lm_xl, lm_rmt, copy120_baseline, copy120_xl, copy120_rmt, repro_copy_rmt, repro_retrieval_rmt, deltanet, gated_deltanet, seg64_deltanet, seg64_gated_deltanet, seg256_deltanet, seg256_gated_deltanet, copy, lm, copy120, repro, delta, all (got 'enwik8')"},
    {"cli-usage", "bench: --list with --peak-only", nullptr, "bench --list --peak-only", 2,
     "--peak-only excludes --list; see 'rmt bench --help'"},
    {"cli-usage", "bench: --list given a value", nullptr, "bench --list lm", 2,
     "unexpected argument lm; see 'rmt bench --help'"},
    {"cli-value", "bench: --pack of a language model", nullptr, "bench --tiny --model lm_xl --pack 2", 1,
     "--pack 2: lm_xl is a language model, whose runs train alone"},
    {"cli-value", "bench: --pack 0", nullptr, "bench --tiny --model rmt --pack 0", 1,
     "--pack must be from 1 to 4096 (got 0)"},
    {"cli-usage", "bench: --pack with --peak-only", nullptr, "bench --peak-only --pack 2", 2,
     "--pack excludes --peak-only"},
    // ---- the repro_* models are read from the reproduction manifest (issue 58) ----------------
    {"bench", "repro model without its manifest", nullptr,
     "bench --tiny --model repro_copy_rmt --reps 1 --warmup 0 --manifest {dir}/none.yaml", 1,
     "rmt bench repro_copy_rmt times the run `rmt reproduce fig4_copy` trains, read from its manifest (--manifest): "},
    {"bench", "repro model of a manifest without its item",
     [](const std::string& d) {
       std::ofstream(d + "/paper.yaml") << "x:\n  seq_len: 4\n  rows:\n    baseline: {1: 1.0}\n";
       std::ofstream(d + "/s.yaml") << "data: {task: copy, length: 4, train: 20, val: 5, test: 5}\n"
                                       "base: {}\ngrid:\n  - {model.kind: [rmt], segments: [2]}\n";
       std::ofstream(d + "/m.yaml") << "paper: paper.yaml\nitems:\n  a:\n    kind: sweep\n    title: t\n"
                                       "    paper_says: p\n    sweep: s.yaml\n    metrics: [acc_teacher_forced]\n";
     },
     "bench --list --model repro_retrieval_rmt --manifest {dir}/m.yaml", 1,
     "rmt bench repro_retrieval_rmt times the RMT run of the sweep item fig4_retrieval of {dir}/m.yaml, which has no "
     "such item"},
});
