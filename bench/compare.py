#!/usr/bin/env python3
"""`make bench`: runs `rmt bench --json` and bench/pytorch_reference.py on the same threads and
prints them side by side, with the ratio rmt / PyTorch and rmt's 1- vs 2-thread scaling.

Every model runs in its own process in both engines, so that peak RSS is per model. This VM has
slow spells of tens of seconds (a run then takes up to 1.6x as long): with --rounds N (default 2)
each model runs N times, alternating the engines, and each engine's fastest run is kept. The fp32
peak is measured once per engine (a large GEMM through rmt's matmul and through torch.mm) and
the faster one is passed to every run, so both engines' MFU use the same denominator.
Needs only the standard library; all raw JSON lines are saved to --out.
"""
import argparse
import json
import os
import subprocess
import sys

MODELS = ["baseline", "xl", "rmt"]


def run_json(cmd):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rmt", default="build/rmt")
    ap.add_argument("--python", default="bench/.venv/bin/python")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2,
                    help="runs per model and engine, alternating; the fastest of each is kept")
    ap.add_argument("--out", default="build/bench_results.jsonl")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    pyref = [args.python, os.path.join(here, "pytorch_reference.py")]
    T = str(args.threads)
    common = ["--reps", str(args.reps), "--warmup", str(args.warmup)]

    # The peak: the faster of the two GEMMs, same threads.
    g_rmt = run_json([args.rmt, "bench", "--peak-only", "--json", "--threads", T])[0]
    g_pt = run_json(pyref + ["--peak-only", "--threads", T])[0]
    peak = max(g_rmt["gemm_gflops"], g_pt["gemm_gflops"])
    peak_arg = ["--peak-gflops", repr(peak)]

    def fastest(runs):
        return min(runs, key=lambda e: e["step_ms"])

    rows, saved = {}, [g_rmt, g_pt]
    for k in MODELS:
        rs, ps = [], []
        for _ in range(max(1, args.rounds)):
            rs += run_json([args.rmt, "bench", "--json", "--model", k, "--threads", T] + common + peak_arg)
            ps += run_json(pyref + ["--model", k, "--threads", T] + common + peak_arg)
        rows[k] = (fastest(rs), fastest(ps))
        saved += rs + ps
    # Thread scaling of rmt (training steps only); the runs above serve when they used 2 threads.
    scale = {(k, rows[k][0]["threads"]): rows[k][0] for k in MODELS}
    for t in (1, 2):
        if all((k, t) in scale for k in MODELS):
            continue
        for _ in range(max(1, args.rounds)):
            for r in run_json([args.rmt, "bench", "--json", "--no-eval", "--threads", str(t)]
                              + common + peak_arg):
                key = (r["model"], t)
                if key not in scale or r["step_ms"] < scale[key]["step_ms"]:
                    scale[key] = r
                saved.append(dict(r, scaling_run=True))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        for s in saved:
            f.write(json.dumps(s) + "\n")

    torch_version = rows[MODELS[0]][1].get("torch_version", "?")
    print()
    print(f"copy workload (batch 32, 72 positions in 3 segments of 24), {T} threads, "
          f"min over {args.reps} steps after {args.warmup} warm-up, fastest of {args.rounds} "
          f"alternating runs per engine")
    print(f"fp32 peak {peak:.1f} GFLOP/s = max(rmt matmul {g_rmt['gemm_gflops']:.1f} at "
          f"{g_rmt['gemm_n']}^3, torch.mm {g_pt['gemm_gflops']:.1f} at {g_pt['gemm_n']}^3); "
          f"PyTorch {torch_version}")
    print()
    hdr = (f"{'model':<9} {'engine':<8} {'tokens/s':>10} {'step ms':>9} {'median':>9} "
           f"{'GFLOP/st':>9} {'GFLOP/s':>8} {'MFU':>7} {'RSS MB':>8}")
    print(hdr)
    print("-" * len(hdr))
    for k in MODELS:
        for e in rows[k]:
            print(f"{k:<9} {e['engine']:<8} {e['tokens_per_s']:>10.0f} {e['step_ms']:>9.1f} "
                  f"{e['step_ms_median']:>9.1f} {e['gflop_per_step']:>9.2f} {e['gflops']:>8.1f} "
                  f"{100 * e['mfu']:>6.1f}% {e['peak_rss_mb']:>8.0f}")
        r, p = rows[k]
        print(f"{k:<9} {'ratio':<8} {r['tokens_per_s'] / p['tokens_per_s']:>9.2f}x "
              f"  (rmt / PyTorch tokens/s)")
    print()
    print("rmt thread scaling (tokens/s)")
    for k in MODELS:
        one, two = scale[(k, 1)]["tokens_per_s"], scale[(k, 2)]["tokens_per_s"]
        print(f"{k:<9} 1 thread {one:>9.0f}   2 threads {two:>9.0f}   speed-up {two / one:.2f}x")
    print()
    print("rmt greedy free-running evaluation of one batch of 32 (re-runs the answer segment "
          "per generated token)")
    for k in MODELS:
        r = rows[k][0]
        if "eval_free_running_ms" in r:
            print(f"{k:<9} teacher-forced {r['eval_teacher_forced_ms']:>8.1f} ms   "
                  f"free-running {r['eval_free_running_ms']:>8.1f} ms (kv cache), "
                  f"{r.get('eval_free_running_rerun_ms', float('nan')):>8.1f} ms (re-running segments)")
    print(f"\nraw JSON lines: {args.out}")


if __name__ == "__main__":
    main()
