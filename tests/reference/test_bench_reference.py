#!/usr/bin/python3
"""bench/pytorch_reference.py, the PyTorch side of `make bench`: it runs (tiny workloads, one
step per model) and reports the same FLOPs per step as `rmt bench`, for the tiny and the full
workloads of the copy models and the language models, so that both engines' MFU share one
definition; the language models' carried state fills in the same number of untimed steps.

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

MODELS = P.COPY_MODELS + P.LM_MODELS


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
        size = "tiny" if tiny else "full"
        flag = ["--tiny"] if tiny else []
        # The workloads as rmt bench describes them (no step run) ...
        listed = {r["model"]: r for r in json_lines([rmt, "bench", "--list"] + flag)}
        # ... and as it runs them (tiny only: the full language models take seconds per step).
        ran = {r["model"]: r for r in json_lines([rmt, "bench", "--json", "--no-eval"] + one_step + flag)} if tiny else {}
        for k in MODELS:
            w, o = P.workload(k, tiny), listed[k]
            py = P.step_flops(k, w) * 1e-9
            check(f"{size} {k}: FLOPs per step rmt {o['gflop_per_step']:.6g} = PyTorch reference "
                  f"{py:.6g}", abs(o["gflop_per_step"] - py) <= 1e-9 * py)
            same = {key: (o[key], w[wk]) for key, wk in
                    [("n_layer", "n_layer"), ("d_model", "d_model"), ("n_head", "n_head"),
                     ("d_head", "d_head"), ("d_inner", "d_inner"), ("vocab", "vocab"),
                     ("mem_len", "mem_len"), ("num_mem_tokens", "num_mem_tokens"),
                     ("batch", "batch"), ("seq_len", "T"), ("segments", "segments"),
                     ("answer_size", "answer"), ("dropout", "dropout"), ("lr", "lr")]}
            if w["lm"]:
                same["bptt_window"] = (o["bptt_window"], w["window"])
                same["fill_steps"] = (o["fill_steps"], P.lm_fill_steps(w))
            bad = {key: v for key, v in same.items() if v[0] != v[1]}
            check(f"{size} {k}: the same workload in both engines{'' if not bad else ' ' + str(bad)}", not bad)
            if tiny:
                check(f"{size} {k}: the run reports the listed FLOPs",
                      abs(ran[k]["gflop_per_step"] - o["gflop_per_step"]) <= 1e-12)

    # The reference itself runs a training step of each model and reports the keys make bench reads.
    runs = json_lines([sys.executable, os.path.join(BENCH, "pytorch_reference.py"), "--tiny",
                       "--model", "all"] + one_step)
    check("pytorch_reference.py --tiny reports all six models", [r["model"] for r in runs] == MODELS)
    tiny_rmt = {r["model"]: r for r in json_lines([rmt, "bench", "--list", "--tiny"])}
    for r in runs:
        o = tiny_rmt[r["model"]]
        same = all(r[key] == o[key] for key in ("batch", "seq_len", "segments", "bptt_window", "params"))
        if r["workload"] == "lm":
            same = same and r["warmup"] == o["fill_steps"]  # --warmup 0: only the fill steps
        check(f"{r['model']}: batch, positions, BPTT window, parameters (and untimed fill steps) as "
              f"in rmt bench", same)
    for r in runs:
        keys = ["tokens_per_s", "step_ms", "gflop_per_step", "gflops", "mfu", "peak_rss_mb", "loss"]
        check(f"{r['model']}: report keys present, loss finite and positive",
              all(k in r for k in keys) and 0 < r["loss"] < 100 and r["tokens_per_s"] > 0)
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
