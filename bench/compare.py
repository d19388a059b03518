#!/usr/bin/env python3
"""`make bench`: runs `rmt bench --json` and bench/pytorch_reference.py on the same threads and
prints them side by side, with the ratio rmt / PyTorch and rmt's 1- vs 2-thread scaling.

Workloads (bench/README.md): the paper's copy models (baseline, xl, rmt), the paper's 12-layer
enwik8 language model at a small batch (lm_baseline, lm_xl, lm_rmt: one segment of every stream
per step, the cache and memory carried), and, by name or group only, the paper's copy120 task
(copy120_baseline, copy120_xl, copy120_rmt: 360 positions in 3 segments of 120), and the
delta-rule models (group delta: deltanet, gated_deltanet at the copy shape, seg64_* and seg256_*
on copies of 64 and 256 symbols in 3 segments; PyTorch runs fla's naive chunked rule, and reads
their workload from `--rmt bench --list`; rmt runs them with --no-eval). --batch B replaces every
selected workload's batch in both engines.

On a GPU (--device cuda, issue 13): both engines run on the device, and PyTorch runs twice more
per model, under torch.compile (--compile-modes, default "default,reduce-overhead": the plain
compiled graph, and the one replayed as CUDA graphs); the table gives rmt / eager and rmt /
compiled per mode. A compiled run that fails is reported as such (its error's last line), not
fatal. The peak GEMM (largest n --gemm-size, default 8192 on the GPU) runs on the device in
both engines; rounds default to 1 and there is no thread-scaling run. Every model runs in its own process in
both engines, so that peak RSS is per model. This VM has slow spells of tens of seconds (a run
then takes up to 1.6x as long): with --rounds N (default 2) each model runs N times, alternating
the engines, and each engine's fastest run is kept. The fp32 peak is measured once per engine (a
large GEMM through rmt's matmul and through torch.mm) and the faster one is passed to every run,
so both engines' MFU use the same denominator. Language-model steps take seconds, so they get
their own (smaller) --lm-reps and --lm-warmup; the steps that fill the carried state are untimed
on top of --lm-warmup in both engines.
Needs only the standard library; all raw JSON lines are saved to --out, each as soon as it is
measured (and a one-line summary of it printed on stderr), so a run stopped part-way keeps what it
measured.
"""
import argparse
import json
import os
import subprocess
import sys

COPY_MODELS = ["baseline", "xl", "rmt"]
LM_MODELS = ["lm_baseline", "lm_xl", "lm_rmt"]
COPY120_MODELS = ["copy120_baseline", "copy120_xl", "copy120_rmt"]
REPRO_MODELS = ["repro_copy_rmt", "repro_retrieval_rmt"]
DELTA_MODELS = [p + k for p in ("", "seg64_", "seg256_") for k in ("deltanet", "gated_deltanet")]
EVERY_MODEL = COPY_MODELS + LM_MODELS + COPY120_MODELS + REPRO_MODELS + DELTA_MODELS
# all = the CPU bench's set (as rmt bench --model all); copy120, repro and delta only when asked for.
GROUPS = {"copy": COPY_MODELS, "lm": LM_MODELS, "copy120": COPY120_MODELS, "repro": REPRO_MODELS,
          "delta": DELTA_MODELS, "all": COPY_MODELS + LM_MODELS}


SAVED = None  # the --out file, open for the whole run


def keep(entries):
    """Appends the entries to --out at once and prints one line per entry on stderr."""
    for e in entries:
        if SAVED is not None:
            SAVED.write(json.dumps(e) + "\n")
        what = e.get("model", "peak")
        if "compile" in e and e.get("compile") not in (None, "eager"):
            what += f" compiled {e.get('compile_mode', '')}"
        rate = (f"{e['tokens_per_s']:.0f} tokens/s, step {e['step_ms']:.3f} ms" if "tokens_per_s" in e
                else f"{e.get('gemm_gflops', 0):.0f} GFLOP/s")
        print(f"measured: {what} ({e.get('engine', '?')}): {rate}",
              file=sys.stderr, flush=True)
    if SAVED is not None:
        SAVED.flush()
    return entries


def run_json(cmd, tag=None):
    """The command's JSON lines (each with `tag`'s keys added), kept in --out."""
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return keep([dict(json.loads(line), **(tag or {})) for line in out.splitlines()
                 if line.strip().startswith("{")])


def try_run_json(cmd):
    """run_json, but a failure returns (None, the last line it printed on stderr)."""
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        return None, last
    return keep([json.loads(line) for line in p.stdout.splitlines() if line.strip().startswith("{")]), ""


def parse_models(text):
    models = []
    for part in text.split(","):
        part = part.strip()
        if part in GROUPS:
            models += GROUPS[part]
        elif part in EVERY_MODEL:
            models.append(part)
        else:
            raise SystemExit(f"compare.py: --models: unknown model or group '{part}' "
                             f"(models: {', '.join(EVERY_MODEL)}; groups: {', '.join(GROUPS)})")
    return [m for m in EVERY_MODEL if m in models]  # in the usual order, once each


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rmt", default="build/rmt")
    ap.add_argument("--python", default=None,
                    help="the python with PyTorch (default: bench/.venv/bin/python if it exists, "
                         "else the python3 running this script, e.g. a GPU machine's own)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--models", default="all",
                    help="comma-separated models or groups (copy, lm, copy120, repro, delta, all = "
                         "copy and lm); default all")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lm-reps", type=int, default=5, help="timed steps of the language models")
    ap.add_argument("--lm-warmup", type=int, default=1,
                    help="untimed language-model steps besides those that fill the carried state")
    ap.add_argument("--rounds", type=int, default=None,
                    help="runs per model and engine, alternating; the fastest of each is kept "
                         "(default 2; 1 with --device cuda)")
    ap.add_argument("--no-scaling", action="store_true",
                    help="skip rmt's separate 1- vs 2-thread runs (always skipped on cuda)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where both engines run (rmt bench --device, pytorch_reference.py --device)")
    ap.add_argument("--batch", type=int, default=None,
                    help="samples (language model: streams) per step in both engines; default "
                         "each workload's own (copy, copy120: 32; lm: 2)")
    ap.add_argument("--compile-modes", default=None,
                    help="comma-separated torch.compile modes PyTorch also runs under (default: "
                         "none on the cpu; 'default,reduce-overhead' on cuda; 'none' for none)")
    ap.add_argument("--gemm-size", type=int, default=None,
                    help="largest n of the peak GEMM (default 2048; 8192 on cuda)")
    ap.add_argument("--out", default="build/bench_results.jsonl")
    args = ap.parse_args()
    models = parse_models(args.models)
    if args.python is None:
        args.python = "bench/.venv/bin/python" if os.path.exists("bench/.venv/bin/python") else sys.executable
    cuda = args.device == "cuda"
    if args.batch is not None and not 1 <= args.batch <= 65536:
        raise SystemExit(f"compare.py: --batch must be from 1 to 65536 (got {args.batch})")
    if args.rounds is None:
        args.rounds = 1 if cuda else 2
    modes = args.compile_modes if args.compile_modes is not None else ("default,reduce-overhead" if cuda else "none")
    modes = [] if modes.strip() == "none" else [m.strip() for m in modes.split(",") if m.strip()]
    known = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
    if any(m not in known for m in modes):
        raise SystemExit(f"compare.py: --compile-modes: each must be one of {', '.join(known)} "
                         f"(or 'none'); got '{args.compile_modes}'")
    global SAVED
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    SAVED = open(args.out, "w")
    here = os.path.dirname(os.path.abspath(__file__))
    pyref = [args.python, os.path.join(here, "pytorch_reference.py")]
    T = str(args.threads)
    # Flags both engines take; none on the CPU by default, so `make bench` runs what it ran.
    common = (["--device", "cuda"] if cuda else []) + (["--batch", str(args.batch)] if args.batch else [])
    gemm = ["--gemm-size", str(args.gemm_size or 8192)] if (cuda or args.gemm_size) else []

    def steps(model):
        if model in LM_MODELS:
            return ["--reps", str(args.lm_reps), "--warmup", str(args.lm_warmup)]
        return ["--reps", str(args.reps), "--warmup", str(args.warmup)]

    # The peak: the faster of the two GEMMs, same threads (same device).
    dev = ["--device", "cuda"] if cuda else []
    g_rmt = run_json([args.rmt, "bench", "--peak-only", "--json", "--threads", T] + dev + gemm)[0]
    g_pt = run_json(pyref + ["--peak-only", "--threads", T] + dev + gemm)[0]
    peak = max(g_rmt["gemm_gflops"], g_pt["gemm_gflops"])
    peak_arg = ["--peak-gflops", repr(peak)]

    def delta_rmt(model):  # the delta models' workload comes from this rmt's bench --list
        return ["--rmt", args.rmt] if model in DELTA_MODELS else []

    def delta_no_eval(model):
        # rmt's free-running evaluation that re-runs the answer segment per generated token takes
        # minutes for the delta models (seg256_deltanet: 459 s on one thread), and is not compared
        return ["--no-eval"] if model in DELTA_MODELS else []

    def fastest(runs):
        return min(runs, key=lambda e: e["step_ms"])

    rows, compiled = {}, {}
    for k in models:
        rs, ps = [], []
        cs = {m: [] for m in modes}
        for _ in range(max(1, args.rounds)):
            rs += run_json([args.rmt, "bench", "--json", "--model", k, "--threads", T] + steps(k) + peak_arg
                           + common + delta_no_eval(k))
            ps += run_json(pyref + ["--model", k, "--threads", T] + steps(k) + peak_arg + common
                           + delta_rmt(k))
            for m in modes:
                if cs[m] is None:
                    continue  # failed in an earlier round
                got, why = try_run_json(pyref + ["--model", k, "--threads", T, "--compile",
                                                 "--compile-mode", m] + steps(k) + peak_arg + common
                                        + delta_rmt(k))
                if got is None:
                    compiled[(k, m)] = why
                    cs[m] = None
                else:
                    cs[m] += got
        rows[k] = (fastest(rs), fastest(ps))
        for m in modes:
            if cs[m]:
                compiled[(k, m)] = fastest(cs[m])
    # Thread scaling of rmt (training steps only); the runs above serve for their thread count.
    scale = {(k, rows[k][0]["threads"]): rows[k][0] for k in models}
    if not args.no_scaling and not cuda:
        for t in (1, 2):
            for k in models:
                if (k, t) in scale:
                    continue
                for _ in range(max(1, args.rounds)):
                    for r in run_json([args.rmt, "bench", "--json", "--no-eval", "--model", k,
                                       "--threads", str(t)] + steps(k) + peak_arg + common,
                                      tag={"scaling_run": True}):
                        key = (r["model"], t)
                        if key not in scale or r["step_ms"] < scale[key]["step_ms"]:
                            scale[key] = r
    SAVED.close()

    torch_version = rows[models[0]][1].get("torch_version", "?")
    print()
    where = (f"device cuda ({rows[models[0]][1].get('device_name', '?')}), " if cuda else "") + f"{T} threads"
    print(f"{where}, fastest of {args.rounds} alternating runs per engine; copy: min over "
          f"{args.reps} steps after {args.warmup} warm-up; language model: min over "
          f"{args.lm_reps} steps after {args.lm_warmup} warm-up and the steps that fill the "
          f"carried state" + ("; compiled: at least 3 warm-up steps" if modes else ""))
    print(f"fp32 peak {peak:.1f} GFLOP/s = max(rmt matmul {g_rmt['gemm_gflops']:.1f} at "
          f"{g_rmt['gemm_n']}^3, torch.mm {g_pt['gemm_gflops']:.1f} at {g_pt['gemm_n']}^3); "
          f"PyTorch {torch_version}")
    mem = "GPU MB" if cuda else "RSS MB"
    ew = 32 if modes else 8  # the engine column: "pytorch compiled reduce-overhead"
    mw = max([20] + [len(k) for k in models])  # the model column: seg256_gated_deltanet is 21
    hdr = (f"{'model':<{mw}} {'engine':<{ew}} {'tokens/s':>10} {'step ms':>9} {'median':>9} "
           f"{'GFLOP/st':>9} {'GFLOP/s':>8} {'MFU':>7} {mem:>8}")

    def memory(e):
        v = e.get("peak_device_mb") if cuda else e["peak_rss_mb"]
        return f"{v:>8.0f}" if v is not None else f"{'-':>8}"

    def batch_of(group):
        return next(rows[k][0]["batch"] for k in group if k in rows)

    for group, title in ((COPY_MODELS, "copy workload (batch {b}, 72 positions in 3 segments of 24)"),
                         (COPY120_MODELS, "copy120 workload (batch {b}, 360 positions in 3 segments "
                                          "of 120, xl cache / rmt memory 60)"),
                         (LM_MODELS, "language model (12 layers, d_model 512, {b} streams, one "
                                     "segment of 128 bytes per step, state carried; lm_rmt "
                                     "BPTT-1)"),
                         (REPRO_MODELS, "the shapes rmt reproduce trains (batch {b}; RMT, 2 layers, 2 "
                                        "memory tokens: copy of 6 in 9 segments of 2 at d_model 32, "
                                        "retrieval in 5 segments of 2 at d_model 64)"),
                         (DELTA_MODELS, "delta-rule models (batch {b}; fla's DeltaNet / Gated DeltaNet "
                                        "layer as the mixer of the copy model, the state carried, bptt "
                                        "all; copy of 24, 64 (seg64), 256 (seg256) symbols in 3 "
                                        "segments; PyTorch: fla's naive chunked rule{chunks})")):
        shown = [k for k in group if k in rows]
        if not shown:
            continue
        print()
        chunks = sorted({rows[k][1].get("chunk_size") for k in shown} - {None})
        print(title.format(b=batch_of(group), chunks=", chunks of " + "/".join(map(str, chunks))
                           if chunks else ""))
        print(hdr)
        print("-" * len(hdr))
        for k in shown:
            engines = [("rmt", rows[k][0]), ("pytorch eager" if modes else "pytorch", rows[k][1])]
            engines += [(f"pytorch compiled {m}", compiled[(k, m)]) for m in modes]
            for label, e in engines:
                if isinstance(e, str):
                    print(f"{k:<{mw}} {label:<{ew}} failed: {e}")
                    continue
                print(f"{k:<{mw}} {label:<{ew}} {e['tokens_per_s']:>10.0f} {e['step_ms']:>9.2f} "
                      f"{e['step_ms_median']:>9.2f} {e['gflop_per_step']:>9.2f} {e['gflops']:>8.1f} "
                      f"{100 * e['mfu']:>6.1f}% {memory(e)}")
            r = rows[k][0]
            for label, e in engines[1:]:
                if not isinstance(e, str):
                    print(f"{k:<{mw}} {'rmt / ' + label[len('pytorch '):] if modes else 'ratio':<{ew}} "
                          f"{r['tokens_per_s'] / e['tokens_per_s']:>9.2f}x  (rmt / PyTorch tokens/s)")
    if all((k, t) in scale for k in models for t in (1, 2)):
        print()
        print("rmt thread scaling (tokens/s)")
        for k in models:
            one, two = scale[(k, 1)]["tokens_per_s"], scale[(k, 2)]["tokens_per_s"]
            print(f"{k:<{mw}} 1 thread {one:>9.0f}   2 threads {two:>9.0f}   speed-up {two / one:.2f}x")
    evals = [k for k in models if "eval_free_running_ms" in rows[k][0]]
    if evals:
        print()
        print(f"rmt greedy free-running evaluation of one copy batch of {rows[evals[0]][0]['batch']} "
              "(cached keys/values vs re-running the answer segment per generated token)")
        for k in evals:
            r = rows[k][0]
            print(f"{k:<{mw}} teacher-forced {r['eval_teacher_forced_ms']:>8.1f} ms   "
                  f"free-running {r['eval_free_running_ms']:>8.1f} ms (kv cache), "
                  f"{r.get('eval_free_running_rerun_ms', float('nan')):>8.1f} ms (re-running segments)")
    samples = [k for k in models if "sample_ms" in rows[k][0]]
    if samples:
        print()
        print("rmt sample's path (one stream, greedy): one segment of bytes after a one-segment prompt")
        for k in samples:
            r = rows[k][0]
            print(f"{k:<{mw}} {r['sample_bytes']} bytes in {r['sample_ms']:>8.1f} ms "
                  f"({1e3 * r['sample_bytes'] / r['sample_ms']:.0f} bytes/s, prompt included)")
    print(f"\nraw JSON lines: {args.out}")


if __name__ == "__main__":
    main()
