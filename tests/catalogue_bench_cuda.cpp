// Bad inputs of rmt bench's workload options for the GPU measurements (issue 13): --batch and
// the copy120 models. Each is refused before any model is built or step run.
#include "tests/catalogue.h"

RMT_CATALOGUE({
    {"cli-value", "bench: --batch 0", nullptr, "bench --tiny --batch 0", 1,
     "--batch must be from 1 to 65536 (got 0)"},
    {"cli-value", "bench: --batch negative", nullptr, "bench --tiny --batch -4", 1,
     "--batch must be from 1 to 65536 (got -4)"},
    {"cli-value", "bench: --batch absurd", nullptr, "bench --tiny --batch 1000000000000", 1,
     "--batch must be from 1 to 65536 (got 1000000000000)"},
    {"cli-value", "bench: --batch not an integer", nullptr, "bench --tiny --batch 32.5", 1,
     "--batch must be an integer from 1 to 65536 (got '32.5')"},
    {"cli-value", "bench: --batch too large for this machine's memory", nullptr,
     "bench --model copy120_rmt --batch 65536 --reps 1 --warmup 0", 1,
     "rmt bench copy120_rmt needs about"},
    {"cli-usage", "bench: --batch with --peak-only", nullptr, "bench --peak-only --batch 8", 2,
     "--batch excludes --peak-only; see 'rmt bench --help'"},
    {"cli-value", "bench: the paper's copy360 task is not a bench model", nullptr,
     "bench --model copy360_rmt", 1, "(got 'copy360_rmt'; did you mean 'copy120_rmt'?)"},
});
