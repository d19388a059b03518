#!/usr/bin/python3
"""bench/compare.py, the one command of the GPU measurements (issue 13, bench/README.md "On a
GPU"), run here without a GPU through two stand-ins that record how they were called:

- a stand-in `rmt` that drops `--device cuda`, adds --tiny and runs the real rmt bench;
- a stand-in python that drops `--device cuda` and the --compile flags, adds --tiny, runs the
  real bench/pytorch_reference.py, and marks its JSON as a GPU run (device_name, peak GPU
  memory) or a compiled one; its compiled run in mode reduce-overhead fails, as one might.
Both answer --peak-only with a fixed GEMM rate (rmt 100, PyTorch 50 GFLOP/s), so the test does
not wait for real peak GEMMs.

Checked: with --device cuda both engines get --device cuda and --batch on every run (the GEMM
peak too, with the GPU's --gemm-size), PyTorch also runs compiled in each mode, a failed compiled
run is reported and does not stop the others, the table prints rmt / eager and rmt / compiled
ratios per model with the batch and the GPU memory, there is no thread-scaling run; without
the new flags compare.py runs exactly the commands `make bench` always ran; and --models with
delta models runs them in both engines (rmt without its evaluation), hands pytorch_reference.py
the same rmt (--rmt, whose bench --list gives their workload), and prints their table with the
same FLOPs per step.

    /usr/bin/python3 tests/reference/test_bench_compare.py --rmt PATH_TO_RMT
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "..", "..", "bench", "compare.py")

FAKE_RMT = r'''
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps(["rmt"] + args) + "\n")
cuda = "--device" in args and args[args.index("--device") + 1] == "cuda"
if cuda:
    i = args.index("--device")
    del args[i:i + 2]
if "--peak-only" in args:  # a fixed peak: the real one takes seconds to minutes here
    print(json.dumps(dict(engine="rmt", threads=1, gemm_n=64, gemm_gflops=100.0)))
    sys.exit(0)
args.append("--tiny")
out = subprocess.run([os.environ["FAKE_REAL_RMT"]] + args, check=True, stdout=subprocess.PIPE,
                     text=True).stdout
for line in out.splitlines():
    j = json.loads(line)
    if cuda:
        j["device"] = "cuda"
    print(json.dumps(j))
'''

FAKE_PYTHON = r'''
import json, os, subprocess, sys
script, args = sys.argv[1], sys.argv[2:]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps(["python", os.path.basename(script)] + args) + "\n")
cuda = "--device" in args and args[args.index("--device") + 1] == "cuda"
if cuda:
    i = args.index("--device")
    del args[i:i + 2]
mode = None
if "--compile" in args:
    args.remove("--compile")
    i = args.index("--compile-mode")
    mode = args[i + 1]
    del args[i:i + 2]
    if mode == "reduce-overhead":
        print("Traceback (most recent call last):\nRuntimeError: fake failure of reduce-overhead",
              file=sys.stderr)
        sys.exit(1)
if "--peak-only" in args:  # a fixed peak: Debian's torch.mm takes seconds per 2048^3 GEMM
    print(json.dumps(dict(engine="pytorch", threads=1, gemm_n=64, gemm_gflops=50.0)))
    sys.exit(0)
args.append("--tiny")
out = subprocess.run([sys.executable, script] + args, check=True, stdout=subprocess.PIPE,
                     text=True).stdout
for line in out.splitlines():
    j = json.loads(line)
    if cuda and "model" in j:
        j.update(device="cuda", device_name="Fake GPU", peak_device_mb=12.5)
    if mode:
        j.update(compile="forward+loss", compile_mode=mode)
    print(json.dumps(j))
'''


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rmt", required=True)
    rmt = os.path.abspath(p.parse_args().rmt)
    failed = 0

    def check(what, ok):
        nonlocal failed
        print(("ok   " if ok else "FAIL ") + what)
        failed += not ok

    with tempfile.TemporaryDirectory() as tmp:
        fakes = {}
        for name, text in (("rmt", FAKE_RMT), ("python", FAKE_PYTHON)):
            path = os.path.join(tmp, "fake_" + name)
            with open(path, "w") as f:
                f.write(f"#!{sys.executable}\n" + text)
            os.chmod(path, 0o755)
            fakes[name] = path
        log = os.path.join(tmp, "calls.jsonl")
        env = dict(os.environ, FAKE_LOG=log, FAKE_REAL_RMT=rmt, PYTHONUNBUFFERED="1")

        def compare(args):
            open(log, "w").close()
            r = subprocess.run([sys.executable, COMPARE, "--rmt", fakes["rmt"], "--python",
                                fakes["python"], "--threads", "1", "--out",
                                os.path.join(tmp, "out.jsonl")] + args,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            with open(log) as f:
                calls = [json.loads(line) for line in f]
            return r, calls

        # ---- the GPU command, as bench/README.md gives it (small) ----
        r, calls = compare(["--device", "cuda", "--models", "rmt,copy120_rmt", "--batch", "3",
                            "--reps", "1", "--warmup", "0", "--gemm-size", "64"])
        out = r.stdout
        check(f"compare.py --device cuda exits 0 (stderr tail: {r.stderr[-300:]!r})", r.returncode == 0)
        rmt_calls = [c[1:] for c in calls if c[0] == "rmt"]
        py_calls = [c[2:] for c in calls if c[0] == "python"]
        check("every rmt call has --device cuda",
              rmt_calls and all(c[c.index("--device") + 1] == "cuda" for c in rmt_calls if "--device" in c)
              and all("--device" in c for c in rmt_calls))
        check("every pytorch_reference.py call has --device cuda",
              py_calls and all("--device" in c and c[c.index("--device") + 1] == "cuda" for c in py_calls))
        peaks = [c for c in rmt_calls + py_calls if "--peak-only" in c]
        check("the GEMM peak of both engines on the device at --gemm-size 64, without --batch",
              len(peaks) == 2 and all(c[c.index("--gemm-size") + 1] == "64" and "--batch" not in c
                                      for c in peaks))
        runs = [c for c in rmt_calls + py_calls if "--peak-only" not in c]
        check("every timed run of both engines has --batch 3",
              runs and all("--batch" in c and c[c.index("--batch") + 1] == "3" for c in runs))
        modes = sorted((c[c.index("--model") + 1], c[c.index("--compile-mode") + 1])
                       for c in py_calls if "--compile" in c)
        check(f"PyTorch compiled once per model and mode (one round on cuda): {modes}",
              modes == [("copy120_rmt", "default"), ("copy120_rmt", "reduce-overhead"),
                        ("rmt", "default"), ("rmt", "reduce-overhead")])
        check("one round per engine and model on cuda",
              sum(1 for c in rmt_calls if "--model" in c) == 2
              and sum(1 for c in py_calls if "--model" in c and "--compile" not in c) == 2)
        check("no thread-scaling runs on cuda", not any("--no-eval" in c for c in rmt_calls))
        check("the header names the GPU", "device cuda (Fake GPU)" in out)
        check("copy and copy120 tables with their batch",
              "copy workload (batch 3, 72 positions" in out and "copy120 workload (batch 3, 360 positions" in out)
        check("rmt / eager and rmt / compiled default ratios for both models",
              out.count("rmt / eager") == 2 and out.count("rmt / compiled default") == 2)
        check("the failed compiled mode is reported with its error, for both models",
              out.count("pytorch compiled reduce-overhead failed: RuntimeError: fake failure of reduce-overhead") == 2)
        check("the GPU memory column", "GPU MB" in out and "12" in out)
        check("the peak is the faster engine's, passed to every timed run",
              "fp32 peak 100.0 GFLOP/s" in out
              and all(c[c.index("--peak-gflops") + 1] == "100.0" for c in runs))
        with open(os.path.join(tmp, "out.jsonl")) as f:
            saved = [json.loads(line) for line in f]
        check("raw JSON lines saved: 2 peaks, 2 rmt, 2 eager, 2 compiled",
              len(saved) == 8 and sum(1 for s in saved if s.get("compile") == "forward+loss") == 2)
        print(out)

        # ---- without the new flags: the commands make bench always ran ----
        r, calls = compare(["--models", "rmt", "--reps", "1", "--warmup", "0", "--rounds", "1"])
        check(f"compare.py on the cpu exits 0 (stderr tail: {r.stderr[-300:]!r})", r.returncode == 0)
        peak = None
        for c in calls:
            if c[0] == "rmt" and "--peak-gflops" in c:
                peak = c[c.index("--peak-gflops") + 1]
                break
        expected = [
            ["rmt", "bench", "--peak-only", "--json", "--threads", "1"],
            ["python", "pytorch_reference.py", "--peak-only", "--threads", "1"],
            ["rmt", "bench", "--json", "--model", "rmt", "--threads", "1", "--reps", "1", "--warmup", "0",
             "--peak-gflops", peak],
            ["python", "pytorch_reference.py", "--model", "rmt", "--threads", "1", "--reps", "1",
             "--warmup", "0", "--peak-gflops", peak],
            ["rmt", "bench", "--json", "--no-eval", "--model", "rmt", "--threads", "2", "--reps", "1",
             "--warmup", "0", "--peak-gflops", peak],
        ]
        check(f"the CPU commands are unchanged: {calls}", calls == expected)
        check("the CPU table has the plain ratio row", "rmt / PyTorch tokens/s" in r.stdout
              and "compiled" not in r.stdout and "RSS MB" in r.stdout)

        # ---- the delta group: both engines, PyTorch told which rmt lists the workload ----
        r, calls = compare(["--models", "deltanet,seg256_gated_deltanet", "--reps", "1", "--warmup",
                            "0", "--rounds", "1", "--no-scaling"])
        out = r.stdout
        check(f"compare.py --models deltanet,seg256_gated_deltanet exits 0 (stderr tail: "
              f"{r.stderr[-300:]!r})", r.returncode == 0)
        py_runs = [c[2:] for c in calls if c[0] == "python" and "--model" in c]
        check("pytorch_reference.py runs both delta models with --rmt (the rmt compare.py runs)",
              [c[c.index("--model") + 1] for c in py_runs] == ["deltanet", "seg256_gated_deltanet"]
              and all(c[c.index("--rmt") + 1] == fakes["rmt"] for c in py_runs))
        rmt_runs = [c for c in calls if c[0] == "rmt" and "--list" not in c and "--model" in c]
        check("rmt runs both delta models without the evaluation (--no-eval)",
              [c[c.index("--model") + 1] for c in rmt_runs] == ["deltanet", "seg256_gated_deltanet"]
              and all("--no-eval" in c for c in rmt_runs))
        listed = [c for c in calls if c[0] == "rmt" and "--list" in c]
        check("the workload of each delta model read from that rmt's bench --list",
              sorted(c[c.index("--model") + 1] for c in listed) == ["deltanet", "seg256_gated_deltanet"])
        check("the delta table with both models and their ratios",
              "delta-rule models (batch 4;" in out and "chunks of 6" in out
              and out.count("rmt / PyTorch tokens/s") == 2
              and all(f"{m} " in out for m in ("deltanet", "seg256_gated_deltanet")))
        with open(os.path.join(tmp, "out.jsonl")) as f:
            saved = [json.loads(line) for line in f if "model" in line]
        by = {}
        for e in saved:
            by.setdefault(e["model"], {})[e["engine"]] = e
        check("the same FLOPs per step in both engines' delta runs",
              all(abs(b["rmt"]["gflop_per_step"] - b["pytorch"]["gflop_per_step"]) <= 1e-12
                  for b in by.values()) and len(by) == 2)
        print(out)

        # ---- bad values: one line ----
        for args, msg in ((["--batch", "0"], "compare.py: --batch must be from 1 to 65536 (got 0)"),
                          (["--device", "cuda", "--compile-modes", "fast"],
                           "compare.py: --compile-modes: each must be one of default, reduce-overhead")):
            r, calls = compare(args)
            check(f"compare.py {' '.join(args)}: exit 1 before any run: {r.stderr.strip()!r}",
                  r.returncode == 1 and msg in r.stderr and not calls)
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
