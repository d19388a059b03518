"""The self-test of the PyTorch reference (rmt_reference.py, armt_reference.py,
delta_model_reference.py) on its own, run by test_golden.py before the golden cases: rel_shift and
the mask against closed forms, the state_dict's names and shapes, the checkpoint round trip,
segment lengths, every BPTT mode against an independent unrolled graph, finite differences and
recomputation, and the language-model steps; for deltanet / gated_deltanet (delta_self_test) the
model written out from its state_dict, segments carrying the state against one pass, fla's rule
against rmt's float64 restatement, the BPTT modes and finite differences.
"""
import math
import os
import tempfile

import torch
import torch.nn.functional as F

import deltanet_reference as D
import rmt_reference as R
from golden_cases import DELTA_EXPAND_V, _batch, _lm_batch, _small_model, ratio

def _closed_form_shift(x):
    q, k = x.shape[-2:]
    mlen = k - q
    out = torch.zeros_like(x)
    for i in range(q):
        for j in range(k):
            if j <= i + mlen:
                out[..., i, j] = x[..., i, j + q - 1 - i]
            elif j == i + mlen + 1:
                out[..., i, j] = 0
            else:
                out[..., i, j] = x[..., i + 1, j - i - mlen - 2]
    return out


def _rule_mask(qlen, mlen, m, has_write, rfc):
    """Per-element statement of docs/paper.md's mask (True = blocked)."""
    L = qlen - m - (m if has_write else 0)
    klen = mlen + qlen
    out = torch.zeros(qlen, klen, dtype=torch.bool)

    def kind_of_key(j):
        if j < mlen:
            return "cache", j
        j -= mlen
        if j < m:
            return "read", j
        j -= m
        if j < L:
            return "tok", j
        return "write", j - L

    for i in range(qlen):
        if i < m:
            qk, qi = "read", i
        elif i < m + L:
            qk, qi = "tok", i - m
        else:
            qk, qi = "write", i - m - L
        for j in range(klen):
            kk, kj = kind_of_key(j)
            if qk == "read":
                vis = (kk == "read") or (kk == "cache" and rfc)
            elif qk == "tok":
                vis = kk in ("cache", "read") or (kk == "tok" and kj <= qi)
            else:
                vis = kk in ("read", "tok", "write") or (kk == "cache" and rfc)
            out[i, j] = not vis
    return out


def _hand_unrolled(model, inp, tgt, N, A):
    """Written independently of run_segments: one graph over all segments,
    plain autograd.grad of the tail-mean cross-entropy."""
    B, T = inp.shape
    n = T // N
    lens = [n + (1 if t < T % N else 0) for t in range(N)]
    mem = model.mem_tokens[:, 0, :].unsqueeze(0).repeat(B, 1, 1) if model.use_mem else None
    cache = ([torch.zeros(B, 0, model.d_model, dtype=torch.float64)] * model.n_layer
             if model.use_cache else None)
    outs, s = [], 0
    for L in lens:
        lg, mem, cache = model.segment(inp[:, s:s + L], mem, cache)
        outs.append(lg)
        s += L
    logits = torch.cat(outs, 1)
    lp = torch.log_softmax(logits[:, T - A:], -1)
    loss = -lp.gather(-1, tgt[:, T - A:, None]).mean()
    names = [n for n, _ in model.named_parameters()]
    gs = torch.autograd.grad(loss, [p for _, p in model.named_parameters()],
                             allow_unused=True)
    return logits.detach(), loss.detach(), {
        n: (g if g is not None else torch.zeros_like(p))
        for n, g, (_, p) in zip(names, gs, model.named_parameters())}


def _max_grad_ratio(ga, gb):
    worst, where = 0.0, ""
    for n in ga:
        r, _ = ratio(ga[n].numpy(), gb[n].numpy())
        if r > worst:
            worst, where = r, n
    return worst, where


EXPECTED_KEYS_LAYER = [
    "dec_attn.qkv_net.weight", "dec_attn.r_net.weight", "dec_attn.o_net.weight",
    "dec_attn.layer_norm.weight", "dec_attn.layer_norm.bias",
    "pos_ff.CoreNet.0.weight", "pos_ff.CoreNet.0.bias",
    "pos_ff.CoreNet.3.weight", "pos_ff.CoreNet.3.bias",
    "pos_ff.layer_norm.weight", "pos_ff.layer_norm.bias"]


def self_test():
    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(f"self-test {'PASS' if ok else 'FAIL'} {name} {detail}".rstrip(), flush=True)

    # 1. rel_shift: literal trick == closed form
    worst = 0.0
    for lead, q, k in [((), 1, 1), ((), 3, 3), ((2,), 3, 5), ((2, 3), 4, 9),
                       ((1, 2), 1, 4), ((3,), 5, 7), ((2, 2), 6, 6)]:
        x = torch.randn(*lead, q, k, dtype=torch.float64)
        worst = max(worst, float((R.rel_shift(x) - _closed_form_shift(x)).abs().max()))
    check("rel_shift == closed form", worst == 0.0, f"max|diff|={worst:g}")

    # 2. mask == per-element rule
    ok = True
    for qlen_tok, mlen, m, hw, rfc in [(5, 0, 0, False, True), (4, 3, 0, False, True),
                                       (4, 0, 2, True, True), (4, 0, 2, False, True),
                                       (3, 5, 2, True, True), (3, 5, 2, True, False),
                                       (1, 2, 3, True, False), (2, 4, 1, False, False)]:
        qlen = qlen_tok + m + (m if hw else 0)
        a = R.build_mask(qlen, mlen, m, hw, rfc)
        b = _rule_mask(qlen, mlen, m, hw, rfc)
        ok = ok and bool(torch.equal(a, b))
    check("mask == docs/paper.md per-element rule", ok)

    # 3. state_dict names and shapes
    mdl = _small_model("xl_rmt", 1, mem_len=3, m=2)
    sd = mdl.state_dict()
    want = {"word_emb.emb_layers.0.weight": [12, 16], "crit.out_layers.0.weight": [12, 16],
            "crit.out_layers.0.bias": [12], "pos_emb.inv_freq": [8], "r_w_bias": [2, 8],
            "r_r_bias": [2, 8], "mem_tokens": [2, 1, 16]}
    for i in range(2):
        for k in EXPECTED_KEYS_LAYER:
            want[f"layers.{i}.{k}"] = None
    shapes_ok = set(sd) == set(want) and all(
        v is None or list(sd[k].shape) == v for k, v in want.items())
    L0 = "layers.0."
    shapes_ok = shapes_ok and list(sd[L0 + "dec_attn.qkv_net.weight"].shape) == [48, 16] \
        and list(sd[L0 + "dec_attn.o_net.weight"].shape) == [16, 16] \
        and list(sd[L0 + "pos_ff.CoreNet.0.weight"].shape) == [32, 16]
    tied = mdl.crit.out_layers[0].weight is mdl.word_emb.emb_layers[0].weight
    check("state_dict names/shapes, tied output", shapes_ok and tied)
    base_keys = set(_small_model("baseline", 1).state_dict())
    check("baseline/xl have no mem_tokens", "mem_tokens" not in base_keys
          and "mem_tokens" not in set(_small_model("xl", 1, mem_len=2).state_dict()))

    # 4. checkpoint round trip (fp32 file, strict load)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "ck.safetensors")
        R.save_checkpoint(p, mdl)
        m2 = R.model_from_checkpoint(p)
        inp, tgt = _batch(1, 2, 9, 12)
        l1, _ = R.run_segments(mdl, inp, 3)
        l2, _ = R.run_segments(m2, inp, 3)
        err = float((l1 - l2).abs().max())
        meta = R.load_safetensors(p)[1]
    check("checkpoint round trip (strict)", err < 1e-5 and meta["kind"] == "xl_rmt"
          and meta["read_mem_from_cache"] == "true", f"fp32 rounding diff={err:.2e}")

    # 5. segment lengths
    check("segment lengths", R.segment_lengths(14, 4) == [4, 4, 3, 3]
          and R.segment_lengths(12, 3) == [4, 4, 4] and R.segment_lengths(10, 4) == [3, 3, 2, 2])

    # 6. bptt all == independent hand-unrolled autograd, every kind
    for kind, kw, T, N, A in [("baseline", {}, 12, 3, 8), ("xl", {"mem_len": 5}, 12, 3, 10),
                              ("rmt", {"m": 2}, 14, 4, 11), ("mt", {"m": 2}, 12, 3, 10),
                              ("xl_rmt", {"m": 2, "mem_len": 5, "rfc": False}, 12, 3, 10),
                              ("xl_rmt", {"m": 3, "mem_len": 7}, 13, 3, 12)]:
        model = _small_model(kind, 2, **kw)
        inp, tgt = _batch(2, 3, T, 12)
        la, sa, ga = R.loss_and_grads(model, inp, tgt, N, A, "all")
        lb, sb, gb = _hand_unrolled(model, inp, tgt, N, A)
        w, where = _max_grad_ratio(ga, gb)
        ok = w < 1e-12 and float((la - lb).abs().max()) < 1e-12 and abs(float(sa - sb)) < 1e-12
        check(f"bptt all == one unrolled graph [{kind} {kw}]", ok, f"worst {w:.1e} {where}")

    # 7. finite differences: bptt all is the true derivative of the loss (rmt, mt: no cache)
    for kind in ("rmt", "mt"):
        model = _small_model(kind, 3, m=2)
        inp, tgt = _batch(3, 2, 12, 12)
        _, _, g = R.loss_and_grads(model, inp, tgt, 3, 10, "all")
        params = dict(model.named_parameters())
        worst = 0.0
        for name, idx in [("mem_tokens", (0, 0, 3)), ("mem_tokens", (1, 0, 7)),
                          ("layers.0.dec_attn.qkv_net.weight", (5, 2)),
                          ("layers.1.dec_attn.r_net.weight", (3, 1)), ("r_r_bias", (1, 2)),
                          ("r_w_bias", (0, 5)), ("layers.0.pos_ff.layer_norm.bias", (4,)),
                          ("word_emb.emb_layers.0.weight", (3, 3)), ("crit.out_layers.0.bias", (2,))]:
            p = params[name]
            h = 1e-6
            with torch.no_grad():
                old = float(p[idx])
                p[idx] = old + h
                lp = float(R.answer_loss(R.run_segments(model, inp, 3)[0], tgt, 10))
                p[idx] = old - h
                lm = float(R.answer_loss(R.run_segments(model, inp, 3)[0], tgt, 10))
                p[idx] = old
            fd = (lp - lm) / (2 * h)
            worst = max(worst, abs(fd - float(g[name][idx])) / max(1e-3, abs(fd)))
        check(f"finite differences == bptt all [{kind}]", worst < 1e-6, f"worst rel {worst:.1e}")

    # 8. bptt 0 with one segment == bptt all
    for kind, kw in [("rmt", {"m": 3}), ("xl_rmt", {"m": 2, "mem_len": 4})]:
        model = _small_model(kind, 4, **kw)
        inp, tgt = _batch(4, 3, 8, 12)
        _, sa, ga = R.loss_and_grads(model, inp, tgt, 1, 6, "all")
        _, s0, g0 = R.loss_and_grads(model, inp, tgt, 1, 6, 0)
        w, where = _max_grad_ratio(ga, g0)
        check(f"bptt 0 == all on 1 segment [{kind}]", w < 1e-13 and float(sa) == float(s0),
              f"worst {w:.1e}")

    # 9. k-recompute with k >= N-1 == bptt all; k = 0 == detach-every-border
    for kind, kw, T, N, A in [("rmt", {"m": 2}, 12, 3, 10), ("rmt", {"m": 3}, 14, 4, 12),
                              ("xl_rmt", {"m": 2, "mem_len": 5}, 16, 4, 13),
                              ("mt", {"m": 2}, 12, 3, 10), ("xl", {"mem_len": 3}, 12, 3, 10),
                              ("armt", {"m": 3}, 16, 4, 13)]:
        model = _small_model(kind, 5, **kw)
        inp, tgt = _batch(5, 3, T, 12)
        la, sa, ga = R.loss_and_grads(model, inp, tgt, N, A, "all")
        ok, msg = True, []
        for k in (N - 1, N + 2):
            lk, sk, gk = R.grads_recompute(model, inp, tgt, N, A, k)
            w, where = _max_grad_ratio(ga, gk)
            ok = ok and w < 1e-12 and abs(float(sa - sk)) < 1e-13 \
                and float((la - lk).abs().max()) < 1e-13
            msg.append(f"k={k}: {w:.1e}")
        _, _, g0 = R.loss_and_grads(model, inp, tgt, N, A, 0)
        _, _, gr0 = R.grads_recompute(model, inp, tgt, N, A, 0)
        w, _ = _max_grad_ratio(g0, gr0)
        ok = ok and w < 1e-12
        msg.append(f"k=0 vs detach: {w:.1e}")
        check(f"k-recompute consistent [{kind} N={N}]", ok, ", ".join(msg))

    # 9b. armt: the read is what its equation says, for one sample at one row (docs/armt.md),
    # and the memory links the segments (all/0/1 differ)
    import armt_reference as AR
    model = _small_model("armt", 7, m=3)
    inp, tgt = _batch(7, 2, 12, 12)
    with torch.no_grad():
        _, st0, _ = model.segment(inp[:, :4], None, None)
        layer, h = model.layers[0], torch.randn(2, 5, 16, dtype=torch.float64)
        q = AR.dpfp(layer.W_mq(h))[1, 2]
        want = h[1, 2] + (q @ st0.A[0][1]) / (float(q @ st0.z[0][1]) + 1e-5)
        xp = torch.cat([torch.relu(layer.W_mq(h)[1, 2]), torch.relu(-layer.W_mq(h)[1, 2])])
        n2 = xp.numel()
        manual = torch.stack([xp[i] * xp[(i - j) % n2] for j in (1, 2, 3) for i in range(n2)])
    ok = float((manual - q).abs().max()) < 1e-15 and want.shape == (16,)
    _, _, ga = R.loss_and_grads(model, inp, tgt, 3, 10, "all")
    _, _, g0 = R.loss_and_grads(model, inp, tgt, 3, 10, 0)
    _, _, g1 = R.loss_and_grads(model, inp, tgt, 3, 10, 1)
    d = [_max_grad_ratio(a, b)[0] for a, b in [(ga, g0), (ga, g1), (g0, g1)]]
    check("armt: DPFP by its definition; bptt all/0/1 differ", ok and min(d) > 1e-3,
          "min ratio %.2e" % min(d))

    # 10. bptt modes differ where they should (the test is sensitive to them)
    model = _small_model("rmt", 6, m=2)
    inp, tgt = _batch(6, 3, 16, 12)
    _, _, ga = R.loss_and_grads(model, inp, tgt, 4, 14, "all")     # answer reaches segment 0
    _, _, g0 = R.loss_and_grads(model, inp, tgt, 4, 14, 0)
    _, _, g1 = R.loss_and_grads(model, inp, tgt, 4, 14, 1)
    _, _, g2 = R.loss_and_grads(model, inp, tgt, 4, 14, 2)
    d = [_max_grad_ratio(a, b)[0] for a, b in [(ga, g0), (ga, g1), (g0, g1), (g1, g2), (g2, ga)]]
    mt0 = float(g0["mem_tokens"].abs().max())
    check("bptt all/0/1/2 give different gradients", min(d) > 1e-3 and mt0 > 0,
          "min ratio %.2e, |mem_tokens grad| bptt0 %.2e" % (min(d), mt0))
    # mem_tokens gets no gradient when the answer lies past segment k
    _, _, gk = R.loss_and_grads(model, inp, tgt, 4, 4, 1)      # answer = last segment only
    check("mem_tokens gradient only via paths reaching segment 0",
          float(gk["mem_tokens"].abs().max()) == 0.0
          and float(R.loss_and_grads(model, inp, tgt, 4, 4, 3)[2]["mem_tokens"].abs().max()) > 0)

    # 11. rmt with 1 segment and m tokens runs
    model = _small_model("rmt", 7, m=5)
    inp, tgt = _batch(7, 3, 10, 12)
    lg, s, g = R.loss_and_grads(model, inp, tgt, 1, 10, "all")
    check("rmt, 1 segment, 5 memory tokens runs", list(lg.shape) == [3, 10, 12]
          and math.isfinite(float(s)) and float(g["mem_tokens"].abs().max()) > 0)

    # 12. Tr-XL cache changes segment-2 logits vs baseline (segment 1 identical)
    xl = _small_model("xl", 8, mem_len=4)
    base = R.RMTReference("baseline", 12, 2, 2, 8, 16, 32).double()
    base.load_state_dict(xl.state_dict(), strict=True)
    inp, _ = _batch(8, 3, 12, 12)
    with torch.no_grad():
        lx, _ = R.run_segments(xl, inp, 3)
        lb, _ = R.run_segments(base, inp, 3)
    d1 = float((lx[:, :4] - lb[:, :4]).abs().max())
    d2 = float((lx[:, 4:8] - lb[:, 4:8]).abs().max())
    check("Tr-XL cache changes segment-2 logits", d1 == 0.0 and d2 > 1e-3,
          f"seg1 diff {d1:g}, seg2 diff {d2:.3f}")

    # 13. the initial memory influences the last segment's logits
    rmt = _small_model("rmt", 9, m=2)
    lr_, _ = R.run_segments(rmt, inp, 3)
    mem0 = rmt.mem_tokens.detach().clone()
    with torch.no_grad():
        rmt.mem_tokens.add_(1.0)
    lr2, _ = R.run_segments(rmt, inp, 3)
    with torch.no_grad():
        rmt.mem_tokens.copy_(mem0)
    check("rmt memory influences all segments", float((lr_ - lr2)[:, 8:].abs().max()) > 1e-3)

    # 14. LM steps with fixed parameters == the last segment of one forward with bptt k
    for kind, kw in [("baseline", {}), ("xl", {"mem_len": 6}), ("rmt", {"m": 3}),
                     ("mt", {"m": 2}), ("xl_rmt", {"m": 2, "mem_len": 5}),
                     ("deltanet", {"expand_v": 1}), ("gated_deltanet", {"expand_v": 2})]:
        model = _small_model(kind, 9, **kw)
        if kind in R.DELTA_KINDS:
            model.rule = "deltanet_reference"   # float64 throughout: the comparison is exact
        B, T, S = 2, 4, 4
        inp, tgt = _lm_batch(9, B, T, S, 12)
        worst = 0.0
        for k in (0, 1, 2):
            stored = {}
            for s in range(S):
                lg, ls, g = R.lm_step(model, inp, tgt, T, s, k, stored)
                cols = (s + 1) * T
                la, sa, ga = R.loss_and_grads(model, inp[:, :cols], tgt[:, :cols], s + 1, T,
                                              k if model.use_mem else 0)
                worst = max(worst, _max_grad_ratio(g, ga)[0],
                            float((lg - la[:, -T:]).abs().max()), abs(float(ls - sa)))
        check(f"LM steps == last segment with bptt k [{kind}]", worst < 1e-12, f"worst {worst:.1e}")

    # 15. deltanet / gated_deltanet
    delta_self_test(check)

    n_ok = sum(results)
    print(f"self-test: {n_ok} passed, {len(results) - n_ok} failed", flush=True)
    return n_ok == len(results)


# ----------------------------------------------------------------------------
# deltanet / gated_deltanet (delta_model_reference.py)

FLA_TOL = 1e-5   # fla's rule (float32 inside) vs the float64 restatement: logits, loss, every grad


def _delta_model(kind, seed, rule="deltanet_reference"):
    """The golden cases' model; by default with the float64 rule, so that comparisons of the
    reference with itself are exact (rounding ~1e-15)."""
    model = _small_model(kind, seed, expand_v=DELTA_EXPAND_V[kind])
    model.rule = rule
    return model


def _delta_by_hand(model, segments):
    """The model written out from its state_dict alone (delta_model_reference.py's docstring),
    carrying each layer's mixer state: logits [B, T, V] of the concatenated segments."""
    sd, d = model.state_dict(), model.d_model

    def ln(z, pre):
        return F.layer_norm(z, (d,), sd[pre + ".weight"], sd[pre + ".bias"])

    out, states = [], [None] * model.n_layer     # None: delta_mixer's zero state
    for tok in segments:
        x = F.embedding(tok, sd["word_emb.emb_layers.0.weight"]) * math.sqrt(d)
        for i in range(model.n_layer):
            pre = f"layers.{i}."
            params = {n[len(pre) + 5:]: t for n, t in sd.items() if n.startswith(pre + "attn.")}
            y, states[i] = D.delta_mixer(x, params, model.kind, states[i])
            h = ln(x + y, pre + "attn_layer_norm")
            ff = pre + "pos_ff.CoreNet."
            z = F.relu(F.linear(h, sd[ff + "0.weight"], sd[ff + "0.bias"]))
            z = F.linear(z, sd[ff + "3.weight"], sd[ff + "3.bias"])
            x = ln(h + z, pre + "pos_ff.layer_norm")
        out.append(F.linear(x, sd["crit.out_layers.0.weight"], sd["crit.out_layers.0.bias"]))
    return torch.cat(out, 1)


def _delta_expected_shapes(model):
    """name -> shape: fla's mixer parameters (deltanet_reference.make_params) under layers.L.attn.,
    rmt's LayerNorms and feed-forward, the tied embedding / output and the output bias."""
    V, d, H = model.n_token, model.d_model, model.n_head
    mixer = D.make_params(model.kind, d, H, model.d_head, model.expand_v * model.d_head,
                          conv_size=model.short_conv)
    want = {"word_emb.emb_layers.0.weight": [V, d], "crit.out_layers.0.weight": [V, d],
            "crit.out_layers.0.bias": [V]}
    for i in range(model.n_layer):
        want.update({f"layers.{i}.attn.{n}": list(t.shape) for n, t in mixer.items()})
        for ln in ("attn_layer_norm", "pos_ff.layer_norm"):
            want[f"layers.{i}.{ln}.weight"] = want[f"layers.{i}.{ln}.bias"] = [d]
        want.update({f"layers.{i}.pos_ff.CoreNet.0.weight": [model.d_inner, d],
                     f"layers.{i}.pos_ff.CoreNet.0.bias": [model.d_inner],
                     f"layers.{i}.pos_ff.CoreNet.3.weight": [d, model.d_inner],
                     f"layers.{i}.pos_ff.CoreNet.3.bias": [d]})
    return want


def _delta_logits_dropping(model, inp, N, names):
    """Logits over N segments with the state entries `names` zeroed at every border."""
    import delta_model_reference as DM
    mem, out = model.initial_memory(inp.shape[0]), []
    for a, b in R.segment_bounds(inp.shape[1], N):
        lg, mem, _ = model.segment(inp[:, a:b], mem, None)
        mem = DM.DeltaState([{n: torch.zeros_like(t) if n in names else t for n, t in st.items()}
                             for st in mem.layers])
        out.append(lg)
    return torch.cat(out, 1)


def delta_self_test(check):
    for kind in R.DELTA_KINDS:
        model = _delta_model(kind, 11)

        # names and shapes; the checkpoint: metadata, no Transformer-XL entries, strict load
        sd = model.state_dict()
        want = _delta_expected_shapes(model)
        ok = set(sd) == set(want) and all(list(sd[n].shape) == v for n, v in want.items())
        ok = ok and model.crit.out_layers[0].weight is model.word_emb.emb_layers[0].weight
        check(f"[{kind}] state_dict = fla's mixer names under layers.L.attn., rmt's LayerNorms and "
              "feed-forward, tied output", ok, f"{len(sd)} entries")
        inp, tgt = _batch(11, 2, 13, 12)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "ck.safetensors")
            R.save_checkpoint(path, model)
            tensors, meta = R.load_safetensors(path)
            m2 = R.model_from_checkpoint(path)    # strict load
            m2.rule = model.rule
            l1, l2 = R.run_segments(model, inp, 3)[0], R.run_segments(m2, inp, 3)[0]
            err = float((l1 - l2).abs().max())
        meta_want = dict(kind=kind, mem_len="0", num_mem_tokens="0", expand_v=str(model.expand_v),
                         short_conv="4", n_head="2", d_head="8")
        ok = all(meta.get(k) == v for k, v in meta_want.items()) and set(tensors) == set(want) \
            and m2.config() == model.config() and err < 1e-5
        check(f"[{kind}] checkpoint round trip (strict; metadata expand_v {meta.get('expand_v')}, "
              f"short_conv {meta.get('short_conv')}; no pos_emb.inv_freq, r_w_bias, r_r_bias)", ok,
              f"fp32 rounding diff={err:.2e}")

        # the model is its equations: written out from the state_dict, 6 segments of 2-3 rows
        # (shorter than the conv window of W-1 = 3: it spans two borders)
        with torch.no_grad():
            lg, _ = R.run_segments(model, inp, 6)
            hand = _delta_by_hand(model, [inp[:, a:b] for a, b in R.segment_bounds(13, 6)])
        err = float((lg - hand).abs().max())
        check(f"[{kind}] model == written out from its state_dict (6 segments)", err < 1e-12,
              f"max|diff| {err:.1e}")

        # (a) bptt all: any segmentation == one segment (the state carries everything)
        l1, s1, g1 = R.loss_and_grads(model, inp, tgt, 1, 13, "all")
        worst = 0.0
        for N in (2, 4, 6, 13):
            lN, sN, gN = R.loss_and_grads(model, inp, tgt, N, 13, "all")
            worst = max(worst, _max_grad_ratio(g1, gN)[0], float((l1 - lN).abs().max()),
                        abs(float(s1 - sN)))
        check(f"[{kind}] bptt all over 2, 4, 6, 13 segments == one segment", worst < 1e-12,
              f"worst {worst:.1e}")

        # both parts of the state carry: dropping S or the conv windows changes later segments
        with torch.no_grad():
            lg, _ = R.run_segments(model, inp, 3)
            dS = _delta_logits_dropping(model, inp, 3, {"S"})
            dC = _delta_logits_dropping(model, inp, 3, {"conv_q", "conv_k", "conv_v"})
        first = max(float((lg - x)[:, :5].abs().max()) for x in (dS, dC))
        later = min(float((lg - x)[:, 5:].abs().max()) for x in (dS, dC))
        check(f"[{kind}] S and the conv windows each carry into later segments",
              first == 0.0 and later > 1e-2, f"min change of later logits {later:.2e}")

        # (c) bptt modes: all / 0 / 1 / 2 differ; k >= N-1 == all; k = 0 == detached borders
        inp4, tgt4 = _batch(12, 3, 16, 12)
        la, sa, ga = R.loss_and_grads(model, inp4, tgt4, 4, 14, "all")
        g = {k: R.loss_and_grads(model, inp4, tgt4, 4, 14, k)[2] for k in (0, 1, 2)}
        d = [_max_grad_ratio(a, b)[0] for a, b in [(ga, g[0]), (ga, g[1]), (g[0], g[1]),
                                                    (g[1], g[2]), (g[2], ga)]]
        check(f"[{kind}] bptt all/0/1/2 give different gradients", min(d) > 1e-3,
              f"min ratio {min(d):.2e}")
        worst = 0.0
        for k in (3, 6):
            lk, sk, gk = R.grads_recompute(model, inp4, tgt4, 4, 14, k)
            worst = max(worst, _max_grad_ratio(ga, gk)[0], float((la - lk).abs().max()),
                        abs(float(sa - sk)))
        worst0 = _max_grad_ratio(g[0], R.grads_recompute(model, inp4, tgt4, 4, 14, 0)[2])[0]
        check(f"[{kind}] k-recompute: k = 3, 6 == all; k = 0 == detached at every border",
              worst < 1e-12 and worst0 < 1e-12, f"{worst:.1e}, {worst0:.1e}")

        # (b) fla's recurrences in the model == rmt's float64 restatement
        fla = _delta_model(kind, 11, rule="fla")
        worst, where = 0.0, ""
        for T, N, A, bptt in [(13, 6, 13, "all"), (16, 4, 14, 0), (16, 4, 14, 1), (14, 4, 11, 2)]:
            x, y = _batch(13, 3, T, 12)
            lr, sr, gr = R.loss_and_grads(model, x, y, N, A, bptt)
            lf, sf, gf = R.loss_and_grads(fla, x, y, N, A, bptt)
            for r, w in [(ratio(lr.numpy(), lf.numpy())[0], f"logits bptt {bptt}"),
                         (abs(float(sr - sf)) / abs(float(sr)), f"loss bptt {bptt}"),
                         *((ratio(gr[n].numpy(), gf[n].numpy())[0], f"grad {n} bptt {bptt}")
                           for n in gr)]:
                if r > worst:
                    worst, where = r, w
        check(f"[{kind}] fla's recurrence in the model == float64 restatement (logits, loss, "
              f"every grad; bptt all/0/1/2)", worst <= FLA_TOL,
              f"worst {worst:.1e} ({where}), tol {FLA_TOL:g}")

        # finite differences: bptt all is the derivative of the loss through the carried state
        x, y = _batch(14, 2, 12, 12)
        _, _, gr = R.loss_and_grads(model, x, y, 3, 10, "all")
        params = dict(model.named_parameters())
        entries = [("layers.0.attn.q_conv1d.weight", (3, 0, 1)),
                   ("layers.1.attn.v_conv1d.weight", (5, 0, 3)),
                   ("layers.0.attn.k_proj.weight", (6, 2)), ("layers.1.attn.b_proj.weight", (1, 4)),
                   ("layers.0.attn.o_norm.weight", (2,)), ("layers.0.attn_layer_norm.bias", (3,)),
                   ("word_emb.emb_layers.0.weight", (3, 3))]
        if kind == "gated_deltanet":
            entries += [("layers.0.attn.A_log", (1,)), ("layers.1.attn.dt_bias", (0,)),
                        ("layers.0.attn.a_proj.weight", (0, 5)),
                        ("layers.1.attn.g_proj.weight", (9, 7))]
        worst = 0.0
        for name, idx in entries:
            p, h = params[name], 1e-5
            with torch.no_grad():
                old = float(p[idx])
                p[idx] = old + h
                lp = float(R.answer_loss(R.run_segments(model, x, 3)[0], y, 10))
                p[idx] = old - h
                lm = float(R.answer_loss(R.run_segments(model, x, 3)[0], y, 10))
                p[idx] = old
            fd = (lp - lm) / (2 * h)
            worst = max(worst, abs(fd - float(gr[name][idx])) / max(1e-3, abs(fd)))
        check(f"[{kind}] finite differences == bptt all ({len(entries)} entries)", worst < 1e-6,
              f"worst rel {worst:.1e}")
