#!/usr/bin/python3
"""bench/pytorch_reference.py, the PyTorch side of `make bench`: it runs (tiny workloads, one
step per model) and reports the same FLOPs per step as `rmt bench`, for the tiny and the full
workloads of the copy, copy120 and language models, at their own batch and at --batch 3 and
256, so that both engines' MFU share one definition; the language models' carried state fills
in the same number of untimed steps. Its --device cuda fails in one line where PyTorch sees no
GPU (and runs where it does), and --compile fails in one line on a PyTorch without
torch.compile (and runs a compiled step where it has one).

The delta models (group delta): their workload comes from `rmt bench --list` and their FLOPs,
computed by rmt's delta formula, match rmt's; one step of each tiny model runs; and the model the
bench times (fla's chunked rule, rule fla_chunk) gives the recurrent rule's loss and gradients
(fla's recurrences, rule fla) within float32 rounding, in chunks that divide the segment, in
several chunks per segment and in padded chunks; fla's own DeltaNet chunked form
(delta_rule_chunkwise) equals the g = 0 path from a zero state.

    /usr/bin/python3 tests/reference/test_bench_reference.py --rmt PATH_TO_RMT
"""
import argparse
import json
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")
# rmt bench reads its repro_* models from the reproduction manifest (lib/experiments/bench.h).
MANIFEST = ["--manifest", os.path.join(HERE, "..", "..", "experiments", "reproduce", "reproduce.yaml")]
sys.path.insert(0, BENCH)
import pytorch_reference as P  # noqa: E402
import delta_model_reference as DM  # noqa: E402
import fla_naive  # noqa: E402
import rmt_reference as R  # noqa: E402

MODELS = P.ALL_MODELS
GROUPS = ("all", "copy120", "repro", "delta")
CHUNK_TOL = 1e-4   # fla's chunked rule vs its recurrence, both float32: loss, logits, every grad


def max_rel(a, b):
    """max |a - b| / max |a| (0 when both are zero)."""
    scale = float(a.abs().max())
    return float((a - b).abs().max()) / scale if scale > 0 else float((a - b).abs().max())


def chunked_vs_recurrent(check):
    """The model the bench times (rule fla_chunk) against fla's recurrences (rule fla): the same
    loss and gradients (bptt all, the state carried across 3 segments of 24), chunks of 24 (the
    bench's choice), 8 (3 per segment) and 16 (padded by fla to 32)."""
    x = torch.randint(0, 12, (3, 72), generator=torch.Generator().manual_seed(5))
    y = torch.randint(0, 12, (3, 72), generator=torch.Generator().manual_seed(6))
    for kind in DM.KINDS:
        model = DM.DeltaModelReference(kind, 12, 2, 2, 8, 16, 32, dropout=0.0,
                                       expand_v=P.DELTA_EXPAND_V[kind], rule="fla").float()
        # larger stds than training's, so that the comparison is sensitive
        model.init_params(gen=torch.Generator().manual_seed(3), w_std=0.3, ln_w_std=0.3,
                          bias_std=0.1)
        lr, sr, gr = R.loss_and_grads(model, x, y, 3, 48, "all")
        for chunk in (0, 8, 16):
            model.rule, model.chunk_size = "fla_chunk", chunk
            lc, sc, gc = R.loss_and_grads(model, x, y, 3, 48, "all")
            worst = max([(max_rel(lr, lc), "logits"), (abs(float(sr - sc)) / abs(float(sr)), "loss")]
                        + [(max_rel(gr[n], gc[n]), n) for n in gr])
            check(f"[{kind}] fla's chunked rule (chunk {chunk or fla_naive.chunk_size_for(24)}) == "
                  f"its recurrence in the model: loss, logits, every gradient (bptt all, 3 "
                  f"segments of 24): worst {worst[0]:.1e} ({worst[1]}), tol {CHUNK_TOL:g}",
                  worst[0] <= CHUNK_TOL and len(gc) == len(gr))
            model.rule, model.chunk_size = "fla", 0
    g = torch.Generator().manual_seed(7)
    B, H, T, dk, dv = 2, 2, 32, 8, 16
    q, v = torch.randn(B, H, T, dk, generator=g), torch.randn(B, H, T, dv, generator=g)
    k = torch.nn.functional.normalize(torch.randn(B, H, T, dk, generator=g), dim=-1)
    beta = torch.rand(B, H, T, generator=g)
    o1, S1 = fla_naive.chunk_rule(q, k, v, beta, chunk_size=8)
    o2, S2 = fla_naive.chunkwise_rule_zero_state(q, k, v, beta, chunk_size=8)
    worst = max(max_rel(o2, o1), max_rel(S2, S1))
    check(f"fla's delta_rule_chunkwise == chunk_rule's g = 0 path from a zero state: worst {worst:.1e}",
          worst <= 1e-6)


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

    def listed_by_rmt(flags):  # the workloads as rmt bench describes them (no step run)
        out = {}
        for group in GROUPS:
            out.update({r["model"]: r for r in json_lines([rmt, "bench", "--list", "--model", group] + MANIFEST + flags)})
        return out

    for tiny in (True, False):
        for batch in (0, 3, 256):
            size = ("tiny" if tiny else "full") + (f" --batch {batch}" if batch else "")
            flag = (["--tiny"] if tiny else []) + (["--batch", str(batch)] if batch else [])
            listed = listed_by_rmt(flag)
            # ... and as it runs them (tiny only: the full language models take seconds per step).
            ran = {}
            if tiny and batch in (0, 3):
                for group in GROUPS:
                    ran.update({r["model"]: r for r in json_lines(
                        [rmt, "bench", "--json", "--no-eval", "--model", group] + MANIFEST + one_step + flag)})
            for k in MODELS:
                w, o = P.workload(k, tiny, batch, rmt), listed[k]
                py = P.step_flops(k, w) * 1e-9
                check(f"{size} {k}: FLOPs per step rmt {o['gflop_per_step']:.6g} = PyTorch reference "
                      f"{py:.6g}", abs(o["gflop_per_step"] - py) <= 1e-9 * py)
                same = {key: (o[key], w[wk]) for key, wk in
                        [("n_layer", "n_layer"), ("d_model", "d_model"), ("n_head", "n_head"),
                         ("d_head", "d_head"), ("d_inner", "d_inner"), ("vocab", "vocab"),
                         ("mem_len", "mem_len"), ("num_mem_tokens", "num_mem_tokens"),
                         ("batch", "batch"), ("seq_len", "T"), ("segments", "segments"),
                         ("answer_size", "answer"), ("dropout", "dropout"), ("lr", "lr"),
                         ("kind", "kind")]}
                if w["lm"]:
                    same["bptt_window"] = (o["bptt_window"], w["window"])
                    same["fill_steps"] = (o["fill_steps"], P.lm_fill_steps(w))
                bad = {key: v for key, v in same.items() if v[0] != v[1]}
                check(f"{size} {k}: the same workload in both engines{'' if not bad else ' ' + str(bad)}", not bad)
                if batch:
                    check(f"{size} {k}: the batch is {batch}", o["batch"] == batch)
                if ran:
                    check(f"{size} {k}: the run reports the listed FLOPs and batch",
                          abs(ran[k]["gflop_per_step"] - o["gflop_per_step"]) <= 1e-12
                          and ran[k]["batch"] == o["batch"])
    full = listed_by_rmt([])
    check("copy120 is the paper's copy of 120 symbols: 360 positions, vocab 10, memory / cache 60",
          (full["copy120_rmt"]["seq_len"], full["copy120_rmt"]["vocab"],
           full["copy120_rmt"]["num_mem_tokens"], full["copy120_xl"]["mem_len"]) == (360, 10, 60, 60))

    # The reference itself runs a training step of each model and reports the keys make bench reads.
    ref = [sys.executable, os.path.join(BENCH, "pytorch_reference.py")]
    runs = json_lines(ref + ["--tiny", "--model", "all"] + one_step)
    check("pytorch_reference.py --tiny reports the six models of all", [r["model"] for r in runs] == MODELS[:6])
    runs += json_lines(ref + ["--tiny", "--model", "copy120"] + one_step)
    check("pytorch_reference.py --tiny --model copy120 reports the copy120 models",
          [r["model"] for r in runs[6:]] == P.COPY120_MODELS)
    runs += json_lines(ref + ["--tiny", "--model", "repro"] + one_step)
    check("pytorch_reference.py --tiny --model repro reports the repro models (rmt reproduce's shapes)",
          [r["model"] for r in runs[9:]] == P.REPRO_MODELS)
    runs += json_lines(ref + ["--tiny", "--model", "delta", "--rmt", rmt] + one_step)
    check("pytorch_reference.py --tiny --model delta reports the delta models, by fla's chunked rule",
          [r["model"] for r in runs[11:]] == P.DELTA_MODELS
          and all(r["delta_rule"].startswith("fla naive_chunk_gated_delta_rule") and r["chunk_size"] == 6
                  for r in runs[11:]))
    tiny_rmt = listed_by_rmt(["--tiny"])
    for r in runs:
        o = tiny_rmt[r["model"]]
        same = all(r[key] == o[key] for key in ("batch", "seq_len", "segments", "bptt_window", "params", "workload"))
        if r["workload"] == "lm":
            same = same and r["warmup"] == o["fill_steps"]  # --warmup 0: only the fill steps
        check(f"{r['model']}: batch, positions, BPTT window, parameters (and untimed fill steps) as "
              f"in rmt bench", same)
    for r in runs:
        keys = ["tokens_per_s", "step_ms", "gflop_per_step", "gflops", "mfu", "peak_rss_mb", "loss"]
        check(f"{r['model']}: report keys present, loss finite and positive, cpu, eager",
              all(k in r for k in keys) and 0 < r["loss"] < 100 and r["tokens_per_s"] > 0
              and r["device"] == "cpu" and r["compile"] == "eager")
    b3 = json_lines(ref + ["--tiny", "--model", "rmt", "--batch", "3"] + one_step)
    check("pytorch_reference.py --batch 3 trains and reports batch 3 and rmt bench's FLOPs",
          [r["batch"] for r in b3] == [3]
          and abs(b3[0]["gflop_per_step"] - listed_by_rmt(["--tiny", "--batch", "3"])["rmt"]["gflop_per_step"]) <= 1e-12)
    d3 = json_lines(ref + ["--tiny", "--model", "gated_deltanet", "--batch", "3", "--rmt", rmt] + one_step)
    check("pytorch_reference.py --model gated_deltanet --batch 3 trains and reports batch 3 and rmt bench's FLOPs",
          [r["batch"] for r in d3] == [3] and abs(d3[0]["gflop_per_step"] - listed_by_rmt(
              ["--tiny", "--batch", "3"])["gated_deltanet"]["gflop_per_step"]) <= 1e-12)
    chunked_vs_recurrent(check)

    def one_line_error(args, expected):
        p = subprocess.run(ref + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = p.stderr.strip().splitlines()
        check(f"pytorch_reference.py {' '.join(args)}: exit 1, one line: {p.stderr.strip()!r}",
              p.returncode == 1 and p.stdout == "" and len(lines) == 1 and expected in lines[0])

    for bad in ("0", "-2", "100000"):
        one_line_error(["--tiny", "--batch", bad], f"--batch must be from 1 to 65536 (got {bad})")
    one_line_error(["--tiny", "--model", "deltanet", "--rmt", "/nonexistent/rmt"] + one_step,
                   "the delta models' workload comes from `/nonexistent/rmt bench --list --model deltanet --tiny`")
    if torch.cuda.is_available():
        g = json_lines(ref + ["--tiny", "--model", "rmt", "--device", "cuda"] + one_step)
        check("pytorch_reference.py --device cuda trains on the GPU and reports its peak memory",
              g[0]["device"] == "cuda" and g[0]["peak_device_mb"] > 0 and 0 < g[0]["loss"] < 100)
    else:
        one_line_error(["--tiny", "--model", "rmt", "--device", "cuda"] + one_step,
                       "--device cuda: PyTorch ")
    if hasattr(torch, "compile"):
        # A compiled step of the tiny rmt model (compilation needs a C++ compiler on the CPU).
        c = json_lines(ref + ["--tiny", "--model", "rmt", "--compile"] + one_step)
        check("pytorch_reference.py --compile runs a compiled step after 3 untimed ones",
              c[0]["compile"] == "forward+loss" and c[0]["compile_mode"] == "default"
              and c[0]["warmup"] == 3 and 0 < c[0]["loss"] < 100)
    else:
        one_line_error(["--tiny", "--model", "rmt", "--compile"] + one_step,
                       "--compile needs torch.compile (PyTorch 2.0 or later)")
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
