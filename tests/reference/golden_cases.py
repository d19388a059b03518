"""The golden cases of test_golden.py: the tolerances, the models and batches they are built from,
the cases (CASES: one step of segments N, bptt and answer size, or Adam steps; LM_CASES: language-
model steps with the state carried), and the runs of `rmt step-dump` compared with the PyTorch
reference (rmt_reference.py): run_case and run_lm_case return (ok, worst_ratio, message).
"""
import json
import math
import os
import shutil
import subprocess
import tempfile

import numpy as np
import torch

import rmt_reference as R

GRAD_TOL = 1e-4      # per tensor max|diff| / max|ref|: logits, grads
LOSS_TOL = 1e-4      # relative, loss and every Adam loss
AFTER_TOL = 1e-3     # per tensor, parameters after Adam
ADAM_COND = 1e-3    # see _check_adam
ADAM_LOOSE = 3.0
ZERO_ABS = 1e-6      # allowed max|got| where the reference tensor is exactly 0


def ratio(ref, got):
    ref = np.asarray(ref, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    if ref.shape != got.shape:
        return math.inf, f"shape {list(got.shape)} != reference {list(ref.shape)}"
    if not np.all(np.isfinite(got)):
        return math.inf, "non-finite values"
    d = float(np.max(np.abs(ref - got))) if ref.size else 0.0
    s = float(np.max(np.abs(ref))) if ref.size else 0.0
    if s == 0.0:
        # reference exactly zero: compare absolutely, scaled to the tolerance
        return d / ZERO_ABS * GRAD_TOL, None
    return d / s, None


CONV_STD = 0.5   # delta kinds: short-conv kernels N(0, .5) (torch's Conv1d default scale), so
                 # that the SiLU after them is not near-linear


def _small_model(kind, seed, mem_len=0, m=0, rfc=True, V=12, n_layer=2, n_head=2,
                 d_head=8, d_model=16, d_inner=32, w_std=0.15, d_mem=3, expand_v=1,
                 short_conv=4):
    torch.manual_seed(seed)
    delta = kind in R.DELTA_KINDS
    extra = dict(expand_v=expand_v, short_conv=short_conv) if delta else {}
    model = R.make_model(kind, V, n_layer, n_head, d_head, d_model, d_inner,
                         mem_len=mem_len, num_mem_tokens=m,
                         read_mem_from_cache=rfc, d_mem=d_mem, **extra).double()
    gen = torch.Generator().manual_seed(seed)
    model.init_params(gen, w_std=w_std, ln_w_std=0.3, bias_std=0.3, uv_std=0.5,
                      mem_std=1.0, **(dict(conv_std=CONV_STD) if delta else {}))
    return model


def _batch(seed, B, T, V):
    g = torch.Generator().manual_seed(10_000 + seed)
    inp = torch.randint(0, V, (B, T), generator=g)
    tgt = torch.randint(0, V, (B, T), generator=g)
    return inp, tgt


def _lm_batch(seed, B, T, S, V):
    """B streams of S segments of T: inputs and their next-token targets [B, S*T]."""
    g = torch.Generator().manual_seed(20_000 + seed)
    text = torch.randint(0, V, (B, S * T + 1), generator=g)
    return text[:, :-1].contiguous(), text[:, 1:].contiguous()



# ============================================================================
# golden cases against `rmt step-dump`

SMALL = dict(V=12, n_layer=2, n_head=2, d_head=8, d_model=16, d_inner=32)
COPY = dict(V=12, n_layer=4, n_head=4, d_head=64, d_model=128, d_inner=256)


def case(name, kind, T, N, A, bptt="all", B=3, mem_len=0, m=0, rfc=True, arch=SMALL,
         w_std=0.15, adam=None, seed=None, expand_v=1, short_conv=4, delta_chunk=None):
    return dict(name=name, kind=kind, T=T, N=N, A=A, bptt=bptt, B=B, mem_len=mem_len, m=m,
                rfc=rfc, arch=arch, w_std=w_std, adam=adam, seed=seed, expand_v=expand_v,
                short_conv=short_conv, delta_chunk=delta_chunk)


CASES = [
    # m >= 3 wherever memory is used: with m <= 2 the rel_shift wrap-around values
    # that memory rows see never appear (the only wrapped slot is the zero pad)
    case("baseline_1seg", "baseline", 12, 1, 8),
    case("baseline_3seg", "baseline", 12, 3, 8),
    case("xl_3seg_mem2", "xl", 12, 3, 10, mem_len=2),
    case("xl_3seg_mem6", "xl", 12, 3, 10, mem_len=6),
    case("rmt_3seg_bptt_all", "rmt", 12, 3, 10, "all", m=3),
    case("rmt_3seg_bptt_0", "rmt", 12, 3, 10, "0", m=3),
    case("rmt_3seg_bptt_1", "rmt", 12, 3, 10, "1", m=3),
    case("rmt_4seg_bptt_all", "rmt", 16, 4, 13, "all", m=3),
    case("rmt_4seg_bptt_0", "rmt", 16, 4, 13, "0", m=3),
    case("rmt_4seg_bptt_1", "rmt", 16, 4, 13, "1", m=3),
    case("rmt_4seg_bptt_2", "rmt", 16, 4, 13, "2", m=3),
    case("rmt_uneven_14_4seg_bptt_all", "rmt", 14, 4, 11, "all", m=4),
    case("rmt_uneven_14_4seg_bptt_1", "rmt", 14, 4, 11, "1", m=4),
    case("baseline_uneven_13_3seg", "baseline", 13, 3, 9),
    case("xl_rmt_no_read_from_cache", "xl_rmt", 12, 3, 10, mem_len=5, m=3, rfc=False),
    case("mt_3seg", "mt", 12, 3, 10, m=3),
    case("xl_rmt_3seg", "xl_rmt", 12, 3, 10, mem_len=5, m=3),
    case("xl_rmt_uneven_13_3seg_bptt_1", "xl_rmt", 13, 3, 12, "1", mem_len=3, m=3),
    # the paper's copy size; weights N(0, .05) rather than .02 so that attention is
    # not near-uniform (more sensitive), LayerNorm/biases/u/v/memory larger as above
    case("copy_size_rmt_3seg", "rmt", 72, 3, 48, "all", B=4, m=24, arch=COPY, w_std=0.05),
    case("adam_rmt_3seg_bptt_all", "rmt", 12, 3, 10, "all", m=3,
         adam=dict(steps=10, lr=3e-3, clip=0.5)),
    case("adam_xl_3seg", "xl", 12, 3, 10, mem_len=3, adam=dict(steps=10, lr=3e-3, clip=5.0)),
    # ARMT (docs/armt.md): the associative memory of every layer links the segments; its
    # tokens at each segment's end are the same learned vectors every time. d_mem 3: keys of 18.
    # ARMT's read divides by q.z + 1e-5, which a query whose features z has not seen brings
    # near 1e-5: there fp32 rounding is amplified, and for some draws PyTorch's own fp32
    # gradients differ from its fp64 ones by 1e-4 (docs/armt.md). These draws (seed) are ones
    # where they agree within ARMT_COND, which run_case checks (_check_conditioning) so that an
    # ill-conditioned draw is reported as such, not as an error of rmt.
    case("armt_3seg_bptt_all", "armt", 12, 3, 10, "all", m=3, seed=121),
    case("armt_3seg_bptt_0", "armt", 12, 3, 10, "0", m=3, seed=122),
    case("armt_3seg_bptt_1", "armt", 12, 3, 10, "1", m=3, seed=123),
    case("armt_4seg_bptt_all", "armt", 16, 4, 13, "all", m=3, seed=500),
    case("armt_4seg_bptt_0", "armt", 16, 4, 13, "0", m=3, seed=500),
    case("armt_4seg_bptt_1", "armt", 16, 4, 13, "1", m=3, seed=125),
    case("armt_4seg_bptt_2", "armt", 16, 4, 13, "2", m=3, seed=503),
    case("armt_uneven_14_4seg_bptt_all", "armt", 14, 4, 11, "all", m=4, seed=504),
    case("adam_armt_3seg_bptt_all", "armt", 12, 3, 10, "all", m=3, seed=504,
         adam=dict(steps=10, lr=3e-3, clip=0.5)),
]
ARMT_COND = 2e-5     # max per-tensor |fp32 - fp64| / max|fp64| of the reference's own gradients

# DeltaNet and Gated DeltaNet (docs/deltanet.md; delta_model_reference.py): every layer's delta
# state S and its short-convolution windows (W-1 = 3 rows of q, k, v) link the segments. d_v 8
# (expand_v 1) and 16 (expand_v 2). The short case's segments of 2 rows are shorter than the
# window: the window entering a segment holds rows of the two segments before it.
DELTA_EXPAND_V = {"deltanet": 1, "gated_deltanet": 2}


def _delta_cases(kind):
    def dcase(name, *a, short_conv=4, **kw):
        return case(name.replace("KIND", kind), kind, *a, expand_v=DELTA_EXPAND_V[kind],
                    short_conv=short_conv, **kw)
    return [
        dcase("KIND_3seg_bptt_all", 12, 3, 10, "all"),
        dcase("KIND_3seg_bptt_0", 12, 3, 10, "0"),
        dcase("KIND_3seg_bptt_1", 12, 3, 10, "1"),
        dcase("KIND_4seg_bptt_2", 16, 4, 13, "2"),
        dcase("KIND_uneven_14_4seg_bptt_all", 14, 4, 11, "all"),
        dcase("KIND_short_10_5seg_bptt_1", 10, 5, 9, "1"),
        dcase("adam_KIND_3seg_bptt_all", 12, 3, 10, "all", adam=dict(steps=10, lr=3e-3, clip=0.5)),
        # model.short_conv 0: no convolution, SiLU alone on q, k, v (fla's use_short_conv off)
        dcase("KIND_no_conv_3seg_bptt_1", 12, 3, 10, "1", short_conv=0),
    ]


# appended, so that the other cases keep their seeds (100 + the index in CASES)
CASES += _delta_cases("deltanet") + _delta_cases("gated_deltanet")
# AdamW (train.weight_decay, docs/training.md "Weight decay") against torch.optim.AdamW with
# mad-lab's groups: wd 1 moves every decaying tensor by about lr * wd * steps = 3e-2 of itself,
# 30 x AFTER_TOL, so a missing decay, or one on a bias, norm, A_log or dt_bias, fails.
CASES += [
    case("adamw_rmt_3seg_bptt_all", "rmt", 12, 3, 10, "all", m=3,
         adam=dict(steps=10, lr=3e-3, clip=0.5, wd=1.0)),
    case("adamw_gated_deltanet_3seg_bptt_all", "gated_deltanet", 12, 3, 10, "all",
         expand_v=DELTA_EXPAND_V["gated_deltanet"], adam=dict(steps=10, lr=3e-3, clip=0.5, wd=1.0)),
]


# The delta rule's form (rmt step-dump --delta-chunk C, model.delta_chunk; the cases above run
# the default, the chunked form in chunks of 16) against the same reference (fla's recurrences):
# chunks shorter than a segment with a short last one, a chunk longer than the segments, Adam
# steps through it; and the recurrence (--delta-chunk 0).
def _delta_chunked_cases(kind):
    ev = DELTA_EXPAND_V[kind]
    return [
        case(f"{kind}_recurrent_uneven_14_4seg_bptt_all", kind, 14, 4, 11, "all", expand_v=ev,
             delta_chunk=0),
        case(f"adam_{kind}_recurrent_3seg_bptt_1", kind, 12, 3, 10, "1", expand_v=ev,
             delta_chunk=0, adam=dict(steps=10, lr=3e-3, clip=0.5)),
        case(f"{kind}_chunked2_uneven_14_4seg_bptt_all", kind, 14, 4, 11, "all", expand_v=ev,
             delta_chunk=2),
        case(f"{kind}_chunked64_3seg_bptt_1", kind, 12, 3, 10, "1", expand_v=ev, delta_chunk=64),
        case(f"adam_{kind}_chunked3_3seg_bptt_0", kind, 15, 3, 12, "0", expand_v=ev,
             delta_chunk=3, adam=dict(steps=10, lr=3e-3, clip=0.5)),
    ]


CASES += _delta_chunked_cases("deltanet") + _delta_chunked_cases("gated_deltanet")


# Language-model steps (docs/paper.md §7; rmt step-dump --segment-length): B streams of S
# segments of T, one step per segment with the state carried from the step before, every
# position of the new segment scored, RMT's BPTT window re-run from the stored state, and an
# Adam step (clipped) after each, so that the stored states come from earlier parameters.
def lm_case(name, kind, bptt=0, mem_len=0, m=0, rfc=True, B=3, T=4, S=5, lr=3e-3, clip=0.5,
            expand_v=1, short_conv=4, delta_chunk=None):
    return dict(name=name, kind=kind, bptt=bptt, mem_len=mem_len, m=m, rfc=rfc, B=B, T=T, S=S,
                lr=lr, clip=clip, arch=SMALL, w_std=0.15, expand_v=expand_v,
                short_conv=short_conv, delta_chunk=delta_chunk)


LM_CASES = [
    lm_case("lm_baseline", "baseline"),
    lm_case("lm_xl_cache3", "xl", mem_len=3),           # a cache shorter than a segment
    lm_case("lm_xl_cache9", "xl", mem_len=9),           # ... reaching two segments back
    lm_case("lm_rmt_bptt0", "rmt", 0, m=3),
    lm_case("lm_rmt_bptt1", "rmt", 1, m=3),
    lm_case("lm_rmt_bptt2", "rmt", 2, m=3),
    lm_case("lm_rmt_bptt3_uneven_batch", "rmt", 3, m=4, B=2, T=5, S=6),
    lm_case("lm_mt_bptt1", "mt", 1, m=3),
    lm_case("lm_xl_rmt_bptt1", "xl_rmt", 1, mem_len=6, m=3),
    lm_case("lm_xl_rmt_bptt2_no_read_from_cache", "xl_rmt", 2, mem_len=3, m=3, rfc=False),
    # the delta state is the memory: step s re-runs segment s-1 from the state stored entering it
    lm_case("lm_deltanet_bptt1", "deltanet", 1, expand_v=DELTA_EXPAND_V["deltanet"]),
    lm_case("lm_gated_deltanet_bptt1", "gated_deltanet", 1,
            expand_v=DELTA_EXPAND_V["gated_deltanet"]),
    lm_case("lm_gated_deltanet_chunked3_bptt2", "gated_deltanet", 2,
            expand_v=DELTA_EXPAND_V["gated_deltanet"], delta_chunk=3),
    lm_case("lm_deltanet_recurrent_bptt1", "deltanet", 1,
            expand_v=DELTA_EXPAND_V["deltanet"], delta_chunk=0),
]


def run_lm_case(c, rmt, seed, keep, device=None):
    a = c["arch"]
    model = _small_model(c["kind"], seed, mem_len=c["mem_len"], m=c["m"], rfc=c["rfc"],
                         V=a["V"], n_layer=a["n_layer"], n_head=a["n_head"],
                         d_head=a["d_head"], d_model=a["d_model"], d_inner=a["d_inner"],
                         w_std=c["w_std"], expand_v=c["expand_v"], short_conv=c["short_conv"])
    model.load_state_dict({k: v.float() for k, v in model.state_dict().items()}, strict=True)
    B, T, S = c["B"], c["T"], c["S"]
    inp, tgt = _lm_batch(seed, B, T, S, a["V"])
    tmp = tempfile.mkdtemp(prefix=f"rmt_golden_{c['name']}_")
    try:
        ck = os.path.join(tmp, "ck.safetensors")
        R.save_checkpoint(ck, model)
        np.save(os.path.join(tmp, "input.npy"), inp.numpy().astype("<i8"))
        np.save(os.path.join(tmp, "target.npy"), tgt.numpy().astype("<i8"))
        out = os.path.join(tmp, "out")
        cmd = [rmt, "step-dump", "--checkpoint", ck, "--input", os.path.join(tmp, "input.npy"),
               "--target", os.path.join(tmp, "target.npy"), "--segment-length", str(T),
               "--bptt", str(c["bptt"]), "--update", "--lr", _fmt(c["lr"]),
               "--clip", _fmt(c["clip"]), "--out", out]
        if c.get("delta_chunk") is not None:
            cmd += ["--delta-chunk", str(c["delta_chunk"])]
        if device:
            cmd += ["--device", device]
        try:
            pr = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, math.inf, f"could not run rmt: {e}"
        if pr.returncode != 0:
            return False, math.inf, (f"rmt exited {pr.returncode}\n  cmd: {' '.join(cmd)}\n"
                                     f"  stderr:\n{pr.stderr.strip()}")
        fails, worst, worst_name, losses = [], 0.0, "", []

        def note(name, r, tol, why=None):
            nonlocal worst, worst_name
            if r / tol * GRAD_TOL > worst:
                worst, worst_name = r / tol * GRAD_TOL, name
            if why or not r <= tol:
                fails.append(f"{name}: {why or ''} ratio {r:.3e} > {tol:g}")

        stored = {}
        moved = 0.0
        first = None
        for s in range(S):
            d = os.path.join(out, f"step{s}")
            try:
                # the parameters rmt started the step from (Adam moved them): the reference
                # takes them as given and checks the step itself
                params, _ = R.load_safetensors(os.path.join(d, "params.safetensors"))
                with torch.no_grad():
                    for name, p in model.named_parameters():
                        p.copy_(torch.from_numpy(params[name].copy()).double())
                if first is None:
                    first = {n: p.detach().clone() for n, p in model.named_parameters()}
                moved = max(moved, max(float((p - first[n]).abs().max())
                                       for n, p in model.named_parameters()))
                logits, loss, grads = R.lm_step(model, inp, tgt, T, s, c["bptt"], stored)
                losses.append(float(loss))
                r, why = ratio(logits.numpy(), np.load(os.path.join(d, "logits.npy")))
                note(f"step {s} logits", r, GRAD_TOL, why)
                with open(os.path.join(d, "loss.json")) as f:
                    got_loss = float(json.load(f)["loss"])
                note(f"step {s} loss", abs(got_loss - float(loss)) / abs(float(loss)), LOSS_TOL)
                got, _ = R.load_safetensors(os.path.join(d, "grads.safetensors"))
                for name, g in grads.items():
                    if name not in got:
                        fails.append(f"step {s}: grads.safetensors lacks {name}")
                        continue
                    r, why = ratio(g.numpy(), got[name])
                    note(f"step {s} grad {name}", r, GRAD_TOL, why)
            except Exception as e:
                fails.append(f"step {s}: reading outputs: {type(e).__name__}: {e}")
        if moved < 1e-3:  # the stored states must come from other parameters than the step's
            fails.append(f"the parameters moved only {moved:.1e} over the steps")
        msg = (f"worst {worst:.2e} ({worst_name}), {S} steps, losses "
               f"{' '.join(f'{x:.4f}' for x in losses)}")
        if fails:
            msg += "\n  " + "\n  ".join(fails)
        return not fails, worst, msg
    finally:
        if keep:
            print(f"  kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def _fmt(x):
    return repr(float(x))


def run_case(c, rmt, seed, keep, device=None):
    """Returns (ok, worst_ratio, message)."""
    a = c["arch"]
    model = _small_model(c["kind"], seed, mem_len=c["mem_len"], m=c["m"], rfc=c["rfc"],
                         V=a["V"], n_layer=a["n_layer"], n_head=a["n_head"],
                         d_head=a["d_head"], d_model=a["d_model"], d_inner=a["d_inner"],
                         w_std=c["w_std"], expand_v=c["expand_v"], short_conv=c["short_conv"])
    # round to fp32 so both sides see exactly the same parameters
    model.load_state_dict({k: v.float() for k, v in model.state_dict().items()}, strict=True)
    inp, tgt = _batch(seed, c["B"], c["T"], a["V"])
    tmp = tempfile.mkdtemp(prefix=f"rmt_golden_{c['name']}_")
    try:
        ck = os.path.join(tmp, "ck.safetensors")
        R.save_checkpoint(ck, model)
        np.save(os.path.join(tmp, "input.npy"), inp.numpy().astype("<i8"))
        np.save(os.path.join(tmp, "target.npy"), tgt.numpy().astype("<i8"))
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        cmd = [rmt, "step-dump", "--checkpoint", ck, "--input", os.path.join(tmp, "input.npy"),
               "--target", os.path.join(tmp, "target.npy"), "--segments", str(c["N"]),
               "--bptt", str(c["bptt"]), "--answer-size", str(c["A"]), "--out", out]
        if c["adam"]:
            cmd += ["--adam-steps", str(c["adam"]["steps"]), "--lr", _fmt(c["adam"]["lr"]),
                    "--clip", _fmt(c["adam"]["clip"])]
            if c["adam"].get("wd"):
                cmd += ["--weight-decay", _fmt(c["adam"]["wd"])]
        if c.get("delta_chunk") is not None:
            cmd += ["--delta-chunk", str(c["delta_chunk"])]
        if device:
            cmd += ["--device", device]
        try:
            pr = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, math.inf, f"could not run rmt: {e}"
        if pr.returncode != 0:
            return False, math.inf, (f"rmt exited {pr.returncode}\n  cmd: {' '.join(cmd)}\n"
                                     f"  stderr:\n{pr.stderr.strip()}")
        if c["adam"]:
            return _check_adam(c, model, inp, tgt, out)
        if c["kind"] == "armt":
            cond = _check_conditioning(c, model, inp, tgt)
            if cond is not None:
                return False, math.inf, cond
        return _check_step(c, model, inp, tgt, out)
    finally:
        if keep:
            print(f"  kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def _check_conditioning(c, model, inp, tgt):
    """None when the reference's fp32 gradients agree with its fp64 ones within ARMT_COND (the
    case can tell rmt's fp32 arithmetic from a wrong gradient), else why not."""
    import copy
    _, _, g64 = R.loss_and_grads(model, inp, tgt, c["N"], c["A"], c["bptt"])
    _, _, g32 = R.loss_and_grads(copy.deepcopy(model).float(), inp, tgt, c["N"], c["A"], c["bptt"])
    worst = max(ratio(g64[k].numpy(), g32[k].double().numpy())[0] for k in g64)
    if worst <= ARMT_COND:
        return None
    return (f"ill-conditioned draw: PyTorch's fp32 gradients differ from its fp64 ones by "
            f"{worst:.1e} > ARMT_COND {ARMT_COND:g}; choose another seed for this case")


def _check_step(c, model, inp, tgt, out):
    logits, loss, grads = R.loss_and_grads(model, inp, tgt, c["N"], c["A"], c["bptt"])
    fails, worst, worst_name = [], 0.0, ""

    def note(name, r, tol, why=None):
        nonlocal worst, worst_name
        if r / tol * GRAD_TOL > worst:  # worst is kept scaled to GRAD_TOL
            worst, worst_name = r / tol * GRAD_TOL, name
        if why or not r <= tol:
            fails.append(f"{name}: {why or ''} ratio {r:.3e} > {tol:g}")

    try:
        got_logits = np.load(os.path.join(out, "logits.npy"))
        if got_logits.dtype != np.float32:
            fails.append(f"logits.npy dtype {got_logits.dtype}, want float32")
        r, why = ratio(logits.numpy(), got_logits)
        note("logits", r, GRAD_TOL, why)
        with open(os.path.join(out, "loss.json")) as f:
            got_loss = float(json.load(f)["loss"])
        note("loss", abs(got_loss - float(loss)) / abs(float(loss)), LOSS_TOL)
        got, _ = R.load_safetensors(os.path.join(out, "grads.safetensors"))
        for name, g in grads.items():
            if name not in got:
                fails.append(f"grads.safetensors lacks {name}")
                continue
            r, why = ratio(g.numpy(), got[name])
            note(f"grad {name}", r, GRAD_TOL, why)
    except Exception as e:  # missing/garbled output files
        fails.append(f"reading outputs: {type(e).__name__}: {e}")
    msg = f"worst {worst:.2e} ({worst_name}), loss {float(loss):.6f}"
    if fails:
        msg += "\n  " + "\n  ".join(fails)
    return not fails, worst, msg


def _check_adam(c, model, inp, tgt, out):
    ad = c["adam"]
    fails, worst, worst_name = [], 0.0, ""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    glog = []
    losses, norms = R.adam_run(model, inp, tgt, c["N"], c["A"], c["bptt"], ad["steps"],
                               ad["lr"], ad["clip"], grad_log=glog, weight_decay=ad.get("wd", 0.0))
    n_loose = 0
    try:
        with open(os.path.join(out, "adam.json")) as f:
            got_losses = [float(x) for x in json.load(f)["losses"]]
        if len(got_losses) != len(losses):
            fails.append(f"adam.json has {len(got_losses)} losses, want {len(losses)}")
        for i, (a, b) in enumerate(zip(losses, got_losses)):
            r = abs(a - b) / abs(a)
            if r / LOSS_TOL * GRAD_TOL > worst:
                worst, worst_name = r / LOSS_TOL * GRAD_TOL, f"loss step {i}"
            if not r <= LOSS_TOL:
                fails.append(f"loss step {i}: {b!r} vs reference {a!r} (rel {r:.2e})")
        after, _ = R.load_safetensors(os.path.join(out, "after.safetensors"))
        for name, p in model.named_parameters():
            if name not in after:
                fails.append(f"after.safetensors lacks {name}")
                continue
            ref = p.detach().numpy()
            got_p = np.asarray(after[name], dtype=np.float64)
            if got_p.shape != ref.shape:
                fails.append(f"after {name}: shape {list(got_p.shape)} != {list(ref.shape)}")
                continue
            # Elements whose gradient never reached ADAM_COND of the tensor's largest
            # gradient have an Adam direction set by rounding noise (e.g. r_net columns
            # fed by near-constant cos features): bound them only by Adam's step size.
            gmax = torch.stack([g[name].abs() for g in glog]).max(0).values
            loose = (gmax < ADAM_COND * float(gmax.max())).numpy()
            n_loose += int(loose.sum())
            drift = np.abs(got_p - ref)[loose]
            if drift.size and float(drift.max()) > ADAM_LOOSE * ad["lr"] * ad["steps"]:
                fails.append(f"after {name}: an ill-conditioned element moved "
                             f"{float(drift.max()):.2e} > {ADAM_LOOSE} * lr * steps")
            ref_c = np.where(loose, 0.0, ref)
            got_c = np.where(loose, 0.0, got_p)
            r = float(np.max(np.abs(ref_c - got_c))) / float(np.max(np.abs(ref)))
            why = None if np.all(np.isfinite(got_p)) else "non-finite values"
            if r / AFTER_TOL * GRAD_TOL > worst:
                worst, worst_name = r / AFTER_TOL * GRAD_TOL, f"after {name}"
            if why or not r <= AFTER_TOL:
                fails.append(f"after {name}: {why or ''} ratio {r:.3e} > {AFTER_TOL:g}")
        # strict load of after.safetensors into the reference
        try:
            m2 = R.make_model(**{k: v for k, v in model.config().items()}).double()
            m2.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in after.items()},
                               strict=True)
            if "crit.out_layers.0.weight" in after and not np.array_equal(
                    after["crit.out_layers.0.weight"], after["word_emb.emb_layers.0.weight"]):
                fails.append("after.safetensors: crit.out_layers.0.weight != "
                             "word_emb.emb_layers.0.weight (tied)")
        except Exception as e:
            fails.append(f"strict load of after.safetensors failed: {e}")
    except Exception as e:
        fails.append(f"reading outputs: {type(e).__name__}: {e}")
    msg = (f"worst {worst:.2e} ({worst_name}; losses rel/{LOSS_TOL:g}, params rel/{AFTER_TOL:g} "
           f"shown scaled to {GRAD_TOL:g}), losses {losses[0]:.4f}->{losses[-1]:.4f}, "
           f"grad norm {norms[0]:.3f} (clip {ad['clip']}), {n_loose} ill-conditioned "
           f"elements bounded by {ADAM_LOOSE}*lr*steps")
    if fails:
        msg += "\n  " + "\n  ".join(fails)
    return not fails, worst, msg
