#!/usr/bin/env python3
"""The workload of `rmt bench` in PyTorch, with the same report keys.

Model: tests/reference/rmt_reference.py (the golden tests' reference, here in float32): the
Transformer-XL backbone with rel-pos attention (u/v biases, the literal pad/reshape rel-shift),
post-LN, tied embedding, RMT read/write memory blocks and mask, Transformer-XL cache, written
the way the authors' mem_transformer.py is (batched matmuls per segment, python loop over
segments and layers).

Copy models (baseline, xl, rmt): forward over 3 segments (train mode, dropout 0.1),
cross-entropy over the answer positions, backward through every segment (bptt all),
clip_grad_norm_(0.25), Adam(lr 1e-4).
Copy120 models (copy120_baseline, copy120_xl, copy120_rmt): the paper's copy of 120 symbols
(360 positions, vocab 10) in 3 segments of 120, xl cache / rmt memory 60; otherwise as copy.
Language models (lm_baseline, lm_xl, lm_rmt): B streams of random bytes; step s runs the
reference's lm_window_loss (the golden LM tests' path: segment s from the state that step s-1
carried, detached; lm_rmt re-runs its BPTT window from the state entering it), every position of
segment s scored, backward through the window, clip_grad_norm_(0.25), Adam(lr 2.5e-4). The
first steps that fill the carried state are untimed, as in rmt bench.

Repro models (repro_copy_rmt, repro_retrieval_rmt): the RMT runs rmt reproduce trains in
fig4_copy and fig4_retrieval (RMT on copy in 9 segments of 2, batch 32; on associative retrieval in
5 segments of 2, batch 128; both 2 layers at d_model 32 with 2 heads, dropout 0, clip 1.0, bptt
all), by name or as the group repro. rmt bench reads them from the manifest; typed here, and
tests/reference/test_bench_reference.py checks that both engines agree.

Delta models (deltanet, gated_deltanet, seg64_*, seg256_*; the group delta, issue 56):
tests/reference/delta_model_reference.py (fla's DeltaNet / Gated DeltaNet layer as the mixer of
rmt's post-LN backbone, fla's defaults: expand_v 1 / 2, short convolution 4) in float32, with the
delta rule computed by fla's naive chunked form (rule fla_chunk: naive_chunk_gated_delta_rule from
fla-core's fla/ops/gated_delta_rule/naive.py, g = 0 for DeltaNet; chunks of the largest divisor of
the segment length up to 64, so none is padded: 24 at the copy shape, 64 for seg64 and seg256),
the state S and the convolution windows carried from segment to segment (bptt all). The step is
the copy models'. Their workload is read from `rmt bench --list` (--rmt, default build/rmt), so
the two engines run the same shapes; the FLOPs per step are computed here by rmt's delta formula
and must equal the listing's (else the run stops).

Usage: bench/.venv/bin/python bench/pytorch_reference.py [--model NAME|copy|lm|copy120|repro|all]
           [--threads T] [--reps N] [--warmup N] [--batch B] [--peak-gflops P | --peak-only]
           [--tiny] [--device cpu|cuda] [--compile [--compile-mode MODE]] [--rmt PATH]
Prints one JSON object per model per line (keys as `rmt bench --json`). `all` is the copy and
language models (as rmt bench); the copy120 models run when named or by their group.

--device cuda: the model, its batches and the optimizer state on the GPU (batches made on the
host and copied before the clock starts), torch.cuda.synchronize() before the clock is read at
both ends of a timed step, fp32 matmuls (float32_matmul_precision "highest": no TF32), peak GPU
memory from torch.cuda.max_memory_allocated (peak_device_mb), the GEMM peak through torch.mm on
the GPU. --compile: torch.compile (dynamic=False, --compile-mode, default "default") of the
copy step's forward and loss (all segments in one graph; backward through the compiled graph)
or, for the language models, of the model's segment function; clip and Adam stay eager. At
least 3 warm-up steps (compilation, CUDA graph recording) are run untimed with it.
"""
import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from rmt_reference import RMTReference, answer_loss, lm_window_loss, run_segments  # noqa: E402
import delta_model_reference  # noqa: E402
import fla_naive  # noqa: E402

COPY_MODELS = ["baseline", "xl", "rmt"]
LM_MODELS = ["lm_baseline", "lm_xl", "lm_rmt"]
COPY120_MODELS = ["copy120_baseline", "copy120_xl", "copy120_rmt"]
REPRO_MODELS = ["repro_copy_rmt", "repro_retrieval_rmt"]
DELTA_MODELS = [p + k for p in ("", "seg64_", "seg256_") for k in ("deltanet", "gated_deltanet")]
# rmt bench's bench_models() order
ALL_MODELS = COPY_MODELS + LM_MODELS + COPY120_MODELS + REPRO_MODELS + DELTA_MODELS
GROUPS = {"copy": COPY_MODELS, "lm": LM_MODELS, "copy120": COPY120_MODELS, "repro": REPRO_MODELS,
          "delta": DELTA_MODELS, "all": COPY_MODELS + LM_MODELS}
DEFAULT_RMT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "rmt")
DELTA_EXPAND_V = {"deltanet": 1, "gated_deltanet": 2}  # rmt's expand_v 0: fla's layer defaults
DELTA_SHORT_CONV = 4                                   # rmt's model.short_conv default (fla's 4)
COMPILE_MODES = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


def workload(name, tiny, batch=0, rmt=None):
    """Same numbers as lib/experiments/bench.cpp bench_workload; batch > 0 replaces the batch.
    The delta models' are read from `rmt bench --list` (rmt: the binary, default build/rmt)."""
    if name in DELTA_MODELS:
        return delta_workload(name, tiny, batch, rmt or DEFAULT_RMT)
    w = _workload(name, tiny)
    if batch > 0:
        w["batch"] = batch
    return w


def _workload(name, tiny):
    if name in LM_MODELS:
        kind = name[3:]
        w = dict(kind=kind, lm=True, n_layer=12, n_head=8, d_head=64, d_model=512, d_inner=2048,
                 batch=2, T=128, memory=10, vocab=256, dropout=0.1, lr=2.5e-4)
        if tiny:
            w.update(n_layer=1, n_head=2, d_head=8, d_model=16, d_inner=32, T=8, memory=2)
        w["mem_len"] = w["T"] if kind == "xl" else 0
        w["num_mem_tokens"] = w["memory"] if kind == "rmt" else 0
        w["window"] = 1 if kind == "rmt" else 0
        w.update(segments=1, answer=w["T"])
        return w
    if name in REPRO_MODELS:  # the shapes rmt reproduce trains (bench.h: repro_copy_rmt, ...)
        retrieval = name == "repro_retrieval_rmt"
        w = dict(kind="rmt", lm=False, n_layer=2, n_head=2, d_head=16, d_model=32,
                 d_inner=64, batch=128 if retrieval else 32, lr=1e-3 if retrieval else 2e-3, clip=1.0, dropout=0.0,
                 vocab=37 if retrieval else 12, segments=5 if retrieval else 9, L=6, pairs=4 if retrieval else 0)
        if tiny:
            w.update(n_layer=1, n_head=2, d_head=8, d_model=16, d_inner=32, batch=4)
        w.update(T=2 * 4 + 2 if retrieval else 18, answer=1 if retrieval else 12, mem_len=0, num_mem_tokens=2)
        return w
    long_copy = name in COPY120_MODELS  # copy of 120 symbols of 8, vocab 10 (docs/paper.md §1)
    kind = name[len("copy120_"):] if long_copy else name
    w = dict(kind=kind, lm=False, n_layer=4, n_head=4, d_head=64, d_model=128, d_inner=256,
             batch=32, L=120 if long_copy else 24, lr=1e-4)
    if tiny:
        w.update(n_layer=1, n_head=2, d_head=8, d_model=16, d_inner=32, batch=4, L=6)
    w.update(vocab=10 if long_copy else 12, segments=3, T=3 * w["L"], answer=2 * w["L"],
             dropout=0.1)
    seg = w["T"] // w["segments"]
    memory = seg // 2 if long_copy else seg  # copy120: the paper's cache / memory 60
    w["mem_len"] = memory if kind == "xl" else 0
    w["num_mem_tokens"] = memory if kind == "rmt" else 0
    return w


def delta_workload(name, tiny, batch, rmt):
    """A delta model's workload as `rmt bench --list --model NAME` describes it (its JSON keys are
    kept under their own names too: listed)."""
    cmd = [rmt, "bench", "--list", "--model", name] + (["--tiny"] if tiny else []) + \
          (["--batch", str(batch)] if batch > 0 else [])
    try:
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        why = getattr(e, "stderr", None) or str(e)
        raise SystemExit(f"pytorch_reference.py: error: {name}: the delta models' workload comes "
                         f"from `{' '.join(cmd)}` (--rmt), which failed: {why.strip()}")
    o = json.loads(out.strip().splitlines()[0])
    L = o["seq_len"] // 3  # the copy sample: L symbols, the separator, L + L (answer 2L)
    assert o["model"] == name and o["seq_len"] == 3 * L and o["answer_size"] == 2 * L, o
    assert o["mem_len"] == 0 and o["num_mem_tokens"] == 0, o
    return dict(kind=o["kind"], lm=False, delta=True, workload=o["workload"], n_layer=o["n_layer"],
                n_head=o["n_head"], d_head=o["d_head"], d_model=o["d_model"],
                d_inner=o["d_inner"], batch=o["batch"], lr=o["lr"], clip=o["clip"],
                dropout=o["dropout"], vocab=o["vocab"], segments=o["segments"], L=L,
                T=o["seq_len"], answer=o["answer_size"], mem_len=0, num_mem_tokens=0,
                expand_v=DELTA_EXPAND_V[o["kind"]], short_conv=DELTA_SHORT_CONV, listed=o)


def delta_layer_flops(w, n, q):
    """A delta layer over q rows of a segment, n of them live past the mixer
    (lib/experiments/bench_workloads.cpp layer_flops, delta_flop_formula)."""
    B, d, H, Dk, di = w["batch"], w["d_model"], w["n_head"], w["d_head"], w["d_inner"]
    gated = w["kind"] == "gated_deltanet"
    Dv = Dk * w["expand_v"]
    HK, HV = H * Dk, H * Dv
    return (2 * B * q * d * (2 * HK + HV + H * (2 if gated else 1))  # q, k, v, b (a) projections
            + 2 * B * q * (2 * HK + HV) * w["short_conv"]            # the short convolutions
            + 3 * 2 * B * H * q * Dk * Dv                            # S^T k, k u^T, S^T q
            + (2 * B * q * d * HV if gated else 0)                   # g_proj
            + 2 * B * n * HV * d                                     # o_proj
            + 2 * 2 * B * n * d * di)                                # FF


def delta_step_flops(w):
    """3 x the forward of every segment: each hands its state to the next or is scored. A
    segment's last layer runs o_proj and the FF only on the rows something reads (its tokens if
    scored, else none: the state comes out of the mixer); the output layer only scored segments."""
    total, t0 = 0.0, 0
    base, extra = divmod(w["T"], w["segments"])
    for s in range(w["segments"]):
        Ts = base + (1 if s < extra else 0)
        scored = t0 + Ts > w["T"] - w["answer"]
        live = Ts if scored else 0
        fwd = ((w["n_layer"] - 1) * delta_layer_flops(w, Ts, Ts) + delta_layer_flops(w, live, Ts)
               + (2 * w["batch"] * Ts * w["d_model"] * w["vocab"] if scored else 0))
        total += 3 * fwd
        t0 += Ts
    return total


def lm_fill_steps(w):
    """Untimed steps that fill the carried state (lib/experiments/bench.cpp lm_fill_steps)."""
    per_step = w["num_mem_tokens"] + w["T"]
    cache_steps = -(-w["mem_len"] // per_step) if w["mem_len"] > 0 else 0
    return max(w["window"], cache_steps)


def layer_flops(w, n, klen):
    B, d, H, Dh, di = w["batch"], w["d_model"], w["n_head"], w["d_head"], w["d_inner"]
    hd = H * Dh
    return (2 * B * klen * d * 3 * hd + 2 * klen * d * hd + 3 * 2 * B * H * n * klen * Dh
            + 2 * B * n * hd * d + 2 * 2 * B * n * d * di)


def segment_forward(w, q, klen, live, Ts, output):
    return ((w["n_layer"] - 1) * layer_flops(w, q, klen) + layer_flops(w, live, klen)
            + (2 * w["batch"] * Ts * w["d_model"] * w["vocab"] if output else 0))


def lm_step_flops(w):
    """A language-model step in the steady state (lib/experiments/bench.cpp lm_flops): 3 x the
    forward of the window (earlier segments: live rows = the memory they pass on, no output
    layer; the new segment without its write block) + the new segment's write block once."""
    m, T = w["num_mem_tokens"], w["T"]
    writes = m if w["kind"] == "rmt" else 0
    cache = w["mem_len"]
    q = m + T + writes
    earlier = w["window"] * segment_forward(w, q, q, writes, T, False)
    q_loss = m + T
    scored = segment_forward(w, q_loss, cache + q_loss, T, T, True)
    state = segment_forward(w, q, cache + q, T + writes, T, True) - scored
    return 3 * (earlier + scored) + state


def segment_flops(kind, w):
    """Per segment of a training step: (full forward, forward of all layers but the last,
    scored), as lib/experiments/bench.cpp segment_flops (see bench/README.md): the last layer counts past its
    keys and values only the rows something reads (scored tokens, the memory passed on), the
    output layer only scored segments, and the last rmt segment has no write block."""
    B, d, H, Dh, di, V = w["batch"], w["d_model"], w["n_head"], w["d_head"], w["d_inner"], w["vocab"]
    hd, m = H * Dh, w["num_mem_tokens"]
    writes = m if kind == "rmt" else 0
    out, cache, t0 = [], 0, 0
    base, extra = divmod(w["T"], w["segments"])
    for s in range(w["segments"]):
        Ts = base + (1 if s < extra else 0)
        last = s + 1 == w["segments"]
        scored = t0 + Ts > w["T"] - w["answer"]
        q = m + Ts + (0 if last else writes)
        klen = cache + q

        def layer(n):
            return (2 * B * klen * d * 3 * hd + 2 * klen * d * hd + 3 * 2 * B * H * n * klen * Dh
                    + 2 * B * n * hd * d + 2 * 2 * B * n * d * di)

        live = (Ts if scored else 0) + (m if m > 0 and not last else 0)
        output = 2 * B * Ts * d * V if scored else 0
        out.append(((w["n_layer"] - 1) * layer(q) + layer(live) + output,
                    (w["n_layer"] - 1) * layer(q), scored))
        if kind == "xl":
            cache = min(w["mem_len"], cache + q)
        t0 += Ts
    return out


def step_flops(kind, w):
    """The FLOPs a training step needs (lib/experiments/bench.cpp step_flops): 3 x the forward of every
    segment the loss depends on. PyTorch's autograd does more than this: it runs the unscored
    first segment (baseline, xl), the last layer's unread rows and rmt's last write block, and
    back-propagates their zero gradients."""
    if w["lm"]:
        return lm_step_flops(w)
    if w.get("delta"):
        return delta_step_flops(w)
    segs = segment_flops(w["kind"], w)
    total = 0.0
    for s, (full, cache_only, scored) in enumerate(segs):
        if scored or w["num_mem_tokens"] > 0:
            total += 3 * full
        elif w["mem_len"] > 0 and s + 1 < len(segs):
            total += cache_only
    return total


def copy_batch(gen, B, L, V):
    x = torch.randint(2, V, (B, L), generator=gen)
    s = torch.cat([x, torch.ones(B, 1, dtype=torch.long), x, x], dim=1)
    return s[:, :-1].contiguous(), s[:, 1:].contiguous()


def retrieval_batch(gen, B, K):
    """K key-value pairs (keys: letters, ids 11..36; values: digits, ids 0..9), a query key, '?'
    (id 10) and the query's value: the layout of tasks/ (10 positions for K = 4, the answer last)."""
    keys = torch.stack([torch.randperm(26, generator=gen)[:K] + 11 for _ in range(B)])
    values = torch.randint(0, 10, (B, K), generator=gen)
    pick = torch.randint(0, K, (B,), generator=gen)
    pairs = torch.stack([keys, values], dim=2).reshape(B, 2 * K)
    rows = torch.arange(B)
    s = torch.cat([pairs, keys[rows, pick][:, None], torch.full((B, 1), 10), values[rows, pick][:, None]], dim=1)
    return s[:, :-1].contiguous(), s[:, 1:].contiguous()


def task_batch(gen, w):
    if w.get("pairs", 0) > 0:
        return retrieval_batch(gen, w["batch"], w["pairs"])
    return copy_batch(gen, w["batch"], w["L"], w["vocab"])


def gemm_gflops(n=2048, reps=10, device="cpu"):
    """Best rate over n, n/2, n/4, each for at least reps samples and 0.3 s (as rmt bench). On the
    CPU a sample is one call; on a GPU as many calls as fill about 2 ms, then a synchronize."""
    cuda = device == "cuda"
    best, best_n = 0.0, n
    size = n
    while size >= max(64, n // 4):
        a = (torch.rand(size, size) - 0.5).to(device)
        b = (torch.rand(size, size) - 0.5).to(device)
        torch.mm(a, b)
        calls = 1
        if cuda:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            torch.mm(a, b)
            torch.cuda.synchronize()
            calls = int(min(10000, max(1, math.ceil(2e-3 / max(time.perf_counter() - t0, 1e-7)))))
        start, r = time.perf_counter(), 0
        while r < reps or time.perf_counter() - start < 0.3:
            t0 = time.perf_counter()
            for _ in range(calls):
                torch.mm(a, b)
            if cuda:
                torch.cuda.synchronize()
            g = 2.0 * size ** 3 * calls / (time.perf_counter() - t0) * 1e-9
            if g > best:
                best, best_n = g, size
            r += 1
        size //= 2
    return best, best_n


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


class Runner:
    """What differs between the CPU and the GPU, eager and compiled: where tensors live, how the
    clock waits for finished work, what is compiled."""

    def __init__(self, args):
        self.device = args.device
        self.cuda = args.device == "cuda"
        self.compile = args.compile
        self.mode = args.compile_mode
        # CUDA graphs (reduce-overhead, max-autotune) reuse their output buffers on the next
        # replay: the step marks its start, and state carried across steps is cloned.
        self.graphs = self.compile and self.cuda and self.mode in ("reduce-overhead", "max-autotune")

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def step_begin(self):
        if self.graphs:
            torch.compiler.cudagraph_mark_step_begin()

    def compiled(self, fn):
        return torch.compile(fn, mode=self.mode, dynamic=False) if self.compile else fn

    def warmup(self, n):
        return max(n, 3) if self.compile else n  # compilation (and graph recording) untimed

    def start_model(self):
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    def report(self, what):
        r = dict(device=self.device,
                 compile=what if self.compile else "eager",
                 compile_mode=self.mode if self.compile else None)
        if self.cuda:
            r.update(device_name=torch.cuda.get_device_name(),
                     peak_device_mb=torch.cuda.max_memory_allocated() / 2 ** 20,
                     fp32_matmul_precision=torch.get_float32_matmul_precision())
        return r


def make_model(w):
    torch.manual_seed(1)
    if w.get("delta"):  # fla's chunked rule, chunk_size 0: the largest divisor of the segment <= 64
        return delta_model_reference.DeltaModelReference(
            w["kind"], w["vocab"], w["n_layer"], w["n_head"], w["d_head"], w["d_model"],
            w["d_inner"], dropout=w["dropout"], expand_v=w["expand_v"],
            short_conv=w["short_conv"], rule="fla_chunk", chunk_size=0).float()
    return RMTReference(w["kind"], w["vocab"], w["n_layer"], w["n_head"], w["d_head"],
                        w["d_model"], w["d_inner"], mem_len=w["mem_len"],
                        num_mem_tokens=w["num_mem_tokens"], read_mem_from_cache=True,
                        dropout=w["dropout"], dropatt=0.0).float()


def bench(name, args, run):
    w = workload(name, args.tiny, args.batch, args.rmt)
    run.start_model()
    if w["lm"]:
        return bench_lm(name, w, args, run)
    model = make_model(w).to(run.device)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=w["lr"])
    params = list(model.parameters())
    gen = torch.Generator().manual_seed(0xBE7C)
    B, T, A, N = w["batch"], w["T"], w["answer"], w["segments"]

    def forward_loss(inp, tgt):  # all segments and the loss: one graph when compiled
        logits, _ = run_segments(model, inp, N)
        return answer_loss(logits, tgt, A)

    step_loss = run.compiled(forward_loss)
    warmup = run.warmup(args.warmup)
    times, loss = [], 0.0
    for step in range(warmup + args.reps):
        inp, tgt = task_batch(gen, w)
        inp, tgt = inp.to(run.device), tgt.to(run.device)
        run.sync()
        t0 = time.perf_counter()
        run.step_begin()
        loss_t = step_loss(inp, tgt)
        opt.zero_grad(set_to_none=True)
        loss_t.backward()
        torch.nn.utils.clip_grad_norm_(params, w.get("clip", 0.25))
        opt.step()
        loss = loss_t.item()
        run.sync()
        dt = time.perf_counter() - t0
        if step >= warmup:
            times.append(dt)
    best = min(times)
    gflop = step_flops(name, w) * 1e-9
    extra = {}
    if w.get("delta"):
        listed = w["listed"]["gflop_per_step"]
        if abs(gflop - listed) > 1e-9 * listed:  # the two engines' MFU share one definition
            raise SystemExit(f"pytorch_reference.py: error: {name}: {gflop!r} GFLOP per step here, "
                             f"{listed!r} in rmt bench --list ({args.rmt}): the formulas differ")
        seg = w["T"] // w["segments"]
        extra = dict(delta_rule="fla naive_chunk_gated_delta_rule" +
                     (" (g = 0)" if w["kind"] == "deltanet" else ""),
                     chunk_size=fla_naive.chunk_size_for(seg), fla_version=fla_naive.load().version)
    return dict(engine="pytorch", torch_version=torch.__version__, model=name,
                workload=(w["workload"] if w.get("delta") else
                          "copy120" if name in COPY120_MODELS else
                          name[:name.rfind("_")] if name in REPRO_MODELS else "copy"),
                threads=torch.get_num_threads(), batch=B, seq_len=T, segments=w["segments"],
                bptt_window=0, warmup=warmup,
                params=sum(p.numel() for p in params), reps=args.reps,
                tokens_per_s=B * T / best, step_ms=best * 1e3,
                step_ms_median=statistics.median(times) * 1e3, gflop_per_step=gflop,
                gflops=gflop / best, peak_rss_mb=peak_rss_mb(), loss=loss, **extra,
                **run.report("forward+loss"))


def bench_lm(name, w, args, run):
    model = make_model(w).to(run.device)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=w["lr"])
    params = list(model.parameters())
    B, T, k = w["batch"], w["T"], w["window"]
    warmup = max(run.warmup(args.warmup), lm_fill_steps(w))
    S = warmup + args.reps
    gen = torch.Generator().manual_seed(0x1B7E)
    streams = torch.randint(0, w["vocab"], (B, S * T + 1), generator=gen)
    inp = streams[:, :-1].contiguous().to(run.device)
    tgt = streams[:, 1:].contiguous().to(run.device)
    if run.compile:  # the window's segments go through one compiled segment function
        model.segment = run.compiled(model.segment)
    stored, times, loss = {}, [], 0.0
    for s in range(S):
        run.sync()
        t0 = time.perf_counter()
        run.step_begin()
        _, loss_t = lm_window_loss(model, inp, tgt, T, s, k, stored)
        if run.graphs:  # the carried state outlives the graphs' next replay
            mem, cache = stored[s + 1]
            stored[s + 1] = (None if mem is None else mem.clone(),
                             None if cache is None else [c.clone() for c in cache])
        opt.zero_grad(set_to_none=True)
        loss_t.backward()
        torch.nn.utils.clip_grad_norm_(params, w.get("clip", 0.25))
        opt.step()
        loss = loss_t.item()
        run.sync()
        dt = time.perf_counter() - t0
        for u in [u for u in stored if u < s + 1 - k]:  # states no later window starts from
            del stored[u]
        if s >= warmup:
            times.append(dt)
    best = min(times)
    gflop = step_flops(name, w) * 1e-9
    return dict(engine="pytorch", torch_version=torch.__version__, model=name, workload="lm",
                threads=torch.get_num_threads(), batch=B, seq_len=T, segments=1,
                bptt_window=k, warmup=warmup, params=sum(p.numel() for p in params),
                reps=args.reps, tokens_per_s=B * T / best, step_ms=best * 1e3,
                step_ms_median=statistics.median(times) * 1e3, gflop_per_step=gflop,
                gflops=gflop / best, peak_rss_mb=peak_rss_mb(), loss=loss,
                **run.report("segment"))


def check_device(args):
    """Refuses, in one line, what this PyTorch cannot run (before any work)."""
    if args.device == "cuda" and not torch.cuda.is_available():
        built = (f"built with CUDA {torch.version.cuda}, but it sees no GPU"
                 if torch.version.cuda else "built without CUDA")
        raise SystemExit(f"pytorch_reference.py: error: --device cuda: PyTorch "
                         f"{torch.__version__} is {built} (torch.cuda.is_available() is False)")
    if args.compile and not hasattr(torch, "compile"):
        raise SystemExit(f"pytorch_reference.py: error: --compile needs torch.compile (PyTorch "
                         f"2.0 or later); this is PyTorch {torch.__version__}")
    if args.compile_mode != "default" and not args.compile:
        raise SystemExit("pytorch_reference.py: error: --compile-mode needs --compile")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="all", choices=ALL_MODELS + list(GROUPS))
    ap.add_argument("--threads", type=int, default=0, help="0 = all cores")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=None,
                    help="samples per step (language model: streams); default the workload's "
                         "(copy, copy120: 32; lm: 2; --tiny: 4 / 2), as rmt bench --batch")
    ap.add_argument("--peak-gflops", type=float, default=0.0,
                    help="fp32 peak for the MFU (default: measure a GEMM through torch.mm)")
    ap.add_argument("--gemm-size", type=int, default=2048)
    ap.add_argument("--peak-only", action="store_true", help="only measure the GEMM peak")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the forward and loss (language models: the segment)")
    ap.add_argument("--compile-mode", default="default", choices=COMPILE_MODES)
    ap.add_argument("--rmt", default=DEFAULT_RMT,
                    help="the rmt binary whose `bench --list` gives the delta models' workload "
                         "(default build/rmt)")
    args = ap.parse_args()
    if args.batch is not None and not 1 <= args.batch <= 65536:
        raise SystemExit(f"pytorch_reference.py: error: --batch must be from 1 to 65536 (got {args.batch})")
    args.batch = args.batch or 0  # 0: the workload's own
    check_device(args)
    torch.set_num_threads(args.threads if args.threads > 0 else os.cpu_count())
    if args.device == "cuda":  # fp32 as rmt's backend: no TF32 in matmuls (PyTorch's default)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if args.peak_only:
        g, n = gemm_gflops(args.gemm_size, device=args.device)
        print(json.dumps(dict(engine="pytorch", threads=torch.get_num_threads(), gemm_n=n,
                              gemm_gflops=g, device=args.device)))
        return
    run = Runner(args)
    kinds = GROUPS.get(args.model, [args.model])
    results = [bench(k, args, run) for k in kinds]
    peak, source = args.peak_gflops, "given (--peak-gflops)"
    if peak <= 0:  # after the models, so that the GEMM buffers do not count in their RSS
        peak, n = gemm_gflops(args.gemm_size, device=args.device)
        source = f"torch.mm {n}^3" + (" on the GPU" if run.cuda else "")
    for r in results:
        r.update(mfu=r["gflops"] / peak, peak_gflops=peak, peak_source=source)
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
