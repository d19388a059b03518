#!/usr/bin/python3
"""bench/pytorch_reference.py, the PyTorch side of `make bench`: it runs (tiny workload, one
step per model) and reports the same FLOPs per step as `rmt bench`, for the tiny and the paper's
workload, so that both engines' MFU share one definition.

    /usr/bin/python3 tests/reference/test_bench_reference.py --rmt PATH_TO_RMT
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")
sys.path.insert(0, BENCH)
import pytorch_reference as P  # noqa: E402

MODELS = ["baseline", "xl", "rmt"]


def json_lines(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rmt", required=True)
    rmt = p.parse_args().rmt
    failed = 0

    def check(what, ok):
        nonlocal failed
        print(("ok   " if ok else "FAIL ") + what)
        failed += not ok

    one_step = ["--reps", "1", "--warmup", "0", "--threads", "1", "--peak-gflops", "100"]
    for tiny in (True, False):
        cmd = [rmt, "bench", "--json", "--no-eval"] + one_step + (["--tiny"] if tiny else [])
        rmt_flops = {r["model"]: r["gflop_per_step"] for r in json_lines(cmd)}
        for k in MODELS:
            py = P.step_flops(k, P.workload(k, tiny)) * 1e-9
            check(f"{'tiny' if tiny else 'paper'} {k}: FLOPs per step rmt {rmt_flops[k]:.6g} "
                  f"= PyTorch reference {py:.6g}", abs(rmt_flops[k] - py) <= 1e-9 * py)

    # The reference itself runs a training step of each model and reports the keys make bench reads.
    runs = json_lines([sys.executable, os.path.join(BENCH, "pytorch_reference.py"), "--tiny",
                       "--model", "all"] + one_step)
    check("pytorch_reference.py --tiny reports all three models", [r["model"] for r in runs] == MODELS)
    for r in runs:
        keys = ["tokens_per_s", "step_ms", "gflop_per_step", "gflops", "mfu", "peak_rss_mb", "loss"]
        check(f"{r['model']}: report keys present, loss finite and positive",
              all(k in r for k in keys) and 0 < r["loss"] < 100 and r["tokens_per_s"] > 0)
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
