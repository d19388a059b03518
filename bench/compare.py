#!/usr/bin/env python3
"""`make bench`: runs `rmt bench --json` and bench/pytorch_reference.py on the same threads and
prints them side by side, with the ratio rmt / PyTorch and rmt's 1- vs 2-thread scaling.

Two workloads (bench/README.md): the paper's copy models (baseline, xl, rmt) and the paper's
12-layer enwik8 language model at a small batch (lm_baseline, lm_xl, lm_rmt: one segment of
every stream per step, the cache and memory carried). Every model runs in its own process in
both engines, so that peak RSS is per model. This VM has slow spells of tens of seconds (a run
then takes up to 1.6x as long): with --rounds N (default 2) each model runs N times, alternating
the engines, and each engine's fastest run is kept. The fp32 peak is measured once per engine (a
large GEMM through rmt's matmul and through torch.mm) and the faster one is passed to every run,
so both engines' MFU use the same denominator. Language-model steps take seconds, so they get
their own (smaller) --lm-reps and --lm-warmup; the steps that fill the carried state are untimed
on top of --lm-warmup in both engines.
Needs only the standard library; all raw JSON lines are saved to --out.
"""
import argparse
import json
import os
import subprocess
import sys

COPY_MODELS = ["baseline", "xl", "rmt"]
LM_MODELS = ["lm_baseline", "lm_xl", "lm_rmt"]
GROUPS = {"copy": COPY_MODELS, "lm": LM_MODELS, "all": COPY_MODELS + LM_MODELS}


def run_json(cmd):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]


def parse_models(text):
    models = []
    for part in text.split(","):
        part = part.strip()
        if part in GROUPS:
            models += GROUPS[part]
        elif part in GROUPS["all"]:
            models.append(part)
        else:
            raise SystemExit(f"compare.py: --models: unknown model or group '{part}' "
                             f"(models: {', '.join(GROUPS['all'])}; groups: copy, lm, all)")
    return [m for m in GROUPS["all"] if m in models]  # in the usual order, once each


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rmt", default="build/rmt")
    ap.add_argument("--python", default="bench/.venv/bin/python")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--models", default="all",
                    help="comma-separated models or groups (copy, lm, all); default all")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lm-reps", type=int, default=5, help="timed steps of the language models")
    ap.add_argument("--lm-warmup", type=int, default=1,
                    help="untimed language-model steps besides those that fill the carried state")
    ap.add_argument("--rounds", type=int, default=2,
                    help="runs per model and engine, alternating; the fastest of each is kept")
    ap.add_argument("--no-scaling", action="store_true",
                    help="skip rmt's separate 1- vs 2-thread runs")
    ap.add_argument("--out", default="build/bench_results.jsonl")
    args = ap.parse_args()
    models = parse_models(args.models)
    here = os.path.dirname(os.path.abspath(__file__))
    pyref = [args.python, os.path.join(here, "pytorch_reference.py")]
    T = str(args.threads)

    def steps(model):
        if model in LM_MODELS:
            return ["--reps", str(args.lm_reps), "--warmup", str(args.lm_warmup)]
        return ["--reps", str(args.reps), "--warmup", str(args.warmup)]

    # The peak: the faster of the two GEMMs, same threads.
    g_rmt = run_json([args.rmt, "bench", "--peak-only", "--json", "--threads", T])[0]
    g_pt = run_json(pyref + ["--peak-only", "--threads", T])[0]
    peak = max(g_rmt["gemm_gflops"], g_pt["gemm_gflops"])
    peak_arg = ["--peak-gflops", repr(peak)]

    def fastest(runs):
        return min(runs, key=lambda e: e["step_ms"])

    rows, saved = {}, [g_rmt, g_pt]
    for k in models:
        rs, ps = [], []
        for _ in range(max(1, args.rounds)):
            rs += run_json([args.rmt, "bench", "--json", "--model", k, "--threads", T] + steps(k) + peak_arg)
            ps += run_json(pyref + ["--model", k, "--threads", T] + steps(k) + peak_arg)
        rows[k] = (fastest(rs), fastest(ps))
        saved += rs + ps
    # Thread scaling of rmt (training steps only); the runs above serve for their thread count.
    scale = {(k, rows[k][0]["threads"]): rows[k][0] for k in models}
    if not args.no_scaling:
        for t in (1, 2):
            for k in models:
                if (k, t) in scale:
                    continue
                for _ in range(max(1, args.rounds)):
                    for r in run_json([args.rmt, "bench", "--json", "--no-eval", "--model", k,
                                       "--threads", str(t)] + steps(k) + peak_arg):
                        key = (r["model"], t)
                        if key not in scale or r["step_ms"] < scale[key]["step_ms"]:
                            scale[key] = r
                        saved.append(dict(r, scaling_run=True))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        for s in saved:
            f.write(json.dumps(s) + "\n")

    torch_version = rows[models[0]][1].get("torch_version", "?")
    print()
    print(f"{T} threads, fastest of {args.rounds} alternating runs per engine; copy: min over "
          f"{args.reps} steps after {args.warmup} warm-up; language model: min over "
          f"{args.lm_reps} steps after {args.lm_warmup} warm-up and the steps that fill the "
          f"carried state")
    print(f"fp32 peak {peak:.1f} GFLOP/s = max(rmt matmul {g_rmt['gemm_gflops']:.1f} at "
          f"{g_rmt['gemm_n']}^3, torch.mm {g_pt['gemm_gflops']:.1f} at {g_pt['gemm_n']}^3); "
          f"PyTorch {torch_version}")
    hdr = (f"{'model':<11} {'engine':<8} {'tokens/s':>10} {'step ms':>9} {'median':>9} "
           f"{'GFLOP/st':>9} {'GFLOP/s':>8} {'MFU':>7} {'RSS MB':>8}")
    for group, title in ((COPY_MODELS, "copy workload (batch 32, 72 positions in 3 segments of 24)"),
                         (LM_MODELS, "language model (12 layers, d_model 512, 2 streams, one "
                                     "segment of 128 bytes per step, state carried; lm_rmt "
                                     "BPTT-1)")):
        shown = [k for k in group if k in rows]
        if not shown:
            continue
        print()
        print(title)
        print(hdr)
        print("-" * len(hdr))
        for k in shown:
            for e in rows[k]:
                print(f"{k:<11} {e['engine']:<8} {e['tokens_per_s']:>10.0f} {e['step_ms']:>9.1f} "
                      f"{e['step_ms_median']:>9.1f} {e['gflop_per_step']:>9.2f} {e['gflops']:>8.1f} "
                      f"{100 * e['mfu']:>6.1f}% {e['peak_rss_mb']:>8.0f}")
            r, p = rows[k]
            print(f"{k:<11} {'ratio':<8} {r['tokens_per_s'] / p['tokens_per_s']:>9.2f}x "
                  f"  (rmt / PyTorch tokens/s)")
    if all((k, t) in scale for k in models for t in (1, 2)):
        print()
        print("rmt thread scaling (tokens/s)")
        for k in models:
            one, two = scale[(k, 1)]["tokens_per_s"], scale[(k, 2)]["tokens_per_s"]
            print(f"{k:<11} 1 thread {one:>9.0f}   2 threads {two:>9.0f}   speed-up {two / one:.2f}x")
    evals = [k for k in models if "eval_free_running_ms" in rows[k][0]]
    if evals:
        print()
        print("rmt greedy free-running evaluation of one copy batch of 32 (cached keys/values vs "
              "re-running the answer segment per generated token)")
        for k in evals:
            r = rows[k][0]
            print(f"{k:<11} teacher-forced {r['eval_teacher_forced_ms']:>8.1f} ms   "
                  f"free-running {r['eval_free_running_ms']:>8.1f} ms (kv cache), "
                  f"{r.get('eval_free_running_rerun_ms', float('nan')):>8.1f} ms (re-running segments)")
    samples = [k for k in models if "sample_ms" in rows[k][0]]
    if samples:
        print()
        print("rmt sample's path (one stream, greedy): one segment of bytes after a one-segment prompt")
        for k in samples:
            r = rows[k][0]
            print(f"{k:<11} {r['sample_bytes']} bytes in {r['sample_ms']:>8.1f} ms "
                  f"({1e3 * r['sample_bytes'] / r['sample_ms']:.0f} bytes/s, prompt included)")
    print(f"\nraw JSON lines: {args.out}")


if __name__ == "__main__":
    main()
