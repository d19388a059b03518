#!/usr/bin/python3
"""Stand-in for `rmt step-dump`, computed by the reference in float32.

Only for exercising test_golden.py before the C++ exists, and for showing
that the tolerances hold for an fp32 implementation:
    /usr/bin/python3 tests/reference/test_golden.py --rmt tests/reference/fake_rmt.py
(`--break NAME` / FAKE_RMT_BREAK perturbs one output, and FAKE_RMT_MUTANT
selects a plausible implementation bug, to see the driver fail. Also `--segment-length T
[--update]`: the language-model steps.)

Also here: `authors_model(...)`, a stand-in of the authors' MemTransformerLM (booydar/LM-RMT,
pytorch/mem_transformer.py) for test_convert.py: the same module tree, class and module names,
attributes and state_dict, so that `torch.save(model)` pickles like theirs, and `logits()`, which
follows their forward (memory tokens in front and, with mem_at_end, at the end; their attention
mask with read_mem_from_cache; their cache update) for the settings rmt implements. Written from
reading their code, not copied.
"""
import argparse
import json
import math
import os
import sys
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rmt_reference as R  # noqa: E402


# --------------------------------------------------------------------------
# stand-in of the authors' MemTransformerLM (module `mem_transformer`, as their train scripts
# import it; the softmax in `proj_adaptive_softmax`)


class PositionalEmbedding(nn.Module):
    __module__ = "mem_transformer"

    def __init__(self, demb):
        super().__init__()
        self.demb = demb
        self.register_buffer("inv_freq", 1 / (10000 ** (torch.arange(0.0, demb, 2.0) / demb)))


class PositionwiseFF(nn.Module):
    __module__ = "mem_transformer"

    def __init__(self, d_model, d_inner, dropout, pre_lnorm=False):
        super().__init__()
        self.d_model, self.d_inner, self.dropout = d_model, d_inner, dropout
        self.CoreNet = nn.Sequential(nn.Linear(d_model, d_inner), nn.ReLU(inplace=True),
                                     nn.Dropout(dropout), nn.Linear(d_inner, d_model),
                                     nn.Dropout(dropout))
        self.layer_norm = nn.LayerNorm(d_model)
        self.pre_lnorm = pre_lnorm

    def forward(self, x):                  # post-LayerNorm only
        return self.layer_norm(x + self.CoreNet(x))


class RelPartialLearnableMultiHeadAttn(nn.Module):
    __module__ = "mem_transformer"

    def __init__(self, n_head, d_model, d_head, dropout, dropatt=0, pre_lnorm=False):
        super().__init__()
        self.n_head, self.d_model, self.d_head, self.dropout = n_head, d_model, d_head, dropout
        self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
        self.drop = nn.Dropout(dropout)
        self.dropatt = nn.Dropout(dropatt)
        self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model)
        self.scale = 1 / (d_head ** 0.5)
        self.pre_lnorm = pre_lnorm
        self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)

    def forward(self, w, r, r_w_bias, r_r_bias, mask, mems):
        """w [B, q, d], r [k, d], mask [q, k] (1 = blocked), mems [B, mlen, d] or None."""
        B, q = w.shape[:2]
        H, D = self.n_head, self.d_head
        cat = w if mems is None else torch.cat([mems, w], 1)
        k = cat.shape[1]
        wq, wk, wv = torch.chunk(self.qkv_net(cat), 3, dim=-1)
        wq = wq[:, -q:].reshape(B, q, H, D)
        wk, wv = wk.reshape(B, k, H, D), wv.reshape(B, k, H, D)
        rk = self.r_net(r).reshape(k, H, D)
        ac = torch.einsum("bind,bjnd->bnij", wq + r_w_bias, wk)
        bd = R.rel_shift(torch.einsum("bind,jnd->bnij", wq + r_r_bias, rk))
        score = ((ac + bd) * self.scale).masked_fill(mask.bool()[None, None], -float("inf"))
        prob = self.dropatt(F.softmax(score, dim=-1))
        vec = torch.einsum("bnij,bjnd->bind", prob, wv).reshape(B, q, H * D)
        return self.layer_norm(w + self.drop(self.o_net(vec)))


class RelPartialLearnableDecoderLayer(nn.Module):
    __module__ = "mem_transformer"

    def __init__(self, n_head, d_model, d_head, d_inner, dropout, dropatt, pre_lnorm):
        super().__init__()
        self.dec_attn = RelPartialLearnableMultiHeadAttn(n_head, d_model, d_head, dropout,
                                                         dropatt, pre_lnorm)
        self.pos_ff = PositionwiseFF(d_model, d_inner, dropout, pre_lnorm)

    def forward(self, x, r, r_w_bias, r_r_bias, mask, mems):
        return self.pos_ff(self.dec_attn(x, r, r_w_bias, r_r_bias, mask, mems))


class AdaptiveEmbedding(nn.Module):
    __module__ = "mem_transformer"

    def __init__(self, n_token, d_embed, d_proj):
        super().__init__()
        self.n_token, self.d_embed, self.d_proj = n_token, d_embed, d_proj
        self.cutoffs, self.div_val = [n_token], 1
        self.cutoff_ends = [0] + self.cutoffs
        self.emb_scale = d_proj ** 0.5
        self.emb_layers = nn.ModuleList([nn.Embedding(n_token, d_embed)])
        self.n_emb_projs = 0


class ProjectedAdaptiveLogSoftmax(nn.Module):
    __module__ = "proj_adaptive_softmax"

    def __init__(self, n_token, d_embed, d_proj):
        super().__init__()
        self.n_token, self.d_embed, self.d_proj = n_token, d_embed, d_proj
        self.cutoffs = [n_token]
        self.cutoff_ends = [0] + self.cutoffs
        self.div_val, self.shortlist_size, self.n_clusters = 1, n_token, 0
        self.head_size = n_token
        self.out_layers = nn.ModuleList([nn.Linear(d_embed, n_token)])
        self.out_projs_0 = None
        self.n_out_projs, self.keep_order = 1, False


class MemTransformerLM(nn.Module):
    __module__ = "mem_transformer"

    def __init__(self, n_token, n_layer, n_head, d_model, d_head, d_inner, dropout=0.0,
                 dropatt=0.0, pre_lnorm=False, tgt_len=6, ext_len=0, mem_len=0,
                 num_mem_tokens=0, read_mem_from_cache=False, mem_at_end=False,
                 same_length=False, attn_type=0, clamp_len=-1, sample_softmax=-1):
        super().__init__()
        self.n_token, self.d_embed, self.d_model = n_token, d_model, d_model
        self.n_head, self.d_head = n_head, d_head
        self.word_emb = AdaptiveEmbedding(n_token, d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.n_layer, self.tgt_len, self.mem_len, self.ext_len = n_layer, tgt_len, mem_len, ext_len
        self.num_mem_tokens = num_mem_tokens
        if num_mem_tokens:
            self.mem_tokens = nn.Parameter(torch.randn(num_mem_tokens, 1, d_model))
        else:
            self.mem_tokens = None
        self.read_mem_from_cache, self.mem_at_end = read_mem_from_cache, mem_at_end
        self.max_klen = tgt_len + ext_len + mem_len + num_mem_tokens
        self.attn_type = attn_type
        self.layers = nn.ModuleList([
            RelPartialLearnableDecoderLayer(n_head, d_model, d_head, d_inner, dropout, dropatt,
                                            pre_lnorm) for _ in range(n_layer)])
        self.sample_softmax = sample_softmax
        self.crit = ProjectedAdaptiveLogSoftmax(n_token, d_model, d_model)
        self.crit.out_layers[0].weight = self.word_emb.emb_layers[0].weight   # tie_weight
        self.same_length, self.clamp_len = same_length, clamp_len
        self.pos_emb = PositionalEmbedding(d_model)
        self.r_w_bias = nn.Parameter(torch.zeros(n_head, d_head))
        self.r_r_bias = nn.Parameter(torch.zeros(n_head, d_head))

    @torch.no_grad()
    def init_for_test(self, seed, std=0.3):
        g = torch.Generator().manual_seed(seed)
        for name, p in self.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=p.dtype)
            if name == "mem_tokens":
                p.copy_(noise)
            elif name.endswith("layer_norm.weight"):
                p.copy_(1 + std * noise)
            else:
                p.copy_(std * noise)
        return self

    def segment(self, tok, mem_tokens, mems):
        """One segment as their _forward and forward do it, batch-major: tok [B, L]."""
        L, m = tok.shape[1], self.num_mem_tokens
        x = self.word_emb.emb_layers[0](tok) * self.word_emb.emb_scale
        if mem_tokens is not None:
            x = torch.cat([mem_tokens, x] + ([mem_tokens] if self.mem_at_end else []), 1)
        mlen = mems[0].shape[1] if mems is not None else 0
        qlen = x.shape[1]
        klen = mlen + qlen
        mask = torch.triu(torch.ones(qlen, klen, dtype=torch.uint8), diagonal=1 + mlen)
        if m:
            mask[:m, mlen:mlen + m] = 0
            mask[:m, :mlen] = 1 - int(self.read_mem_from_cache)
            if self.mem_at_end:
                mask[-m:, -m:] = 0
                mask[-m:, :mlen] = 1 - int(self.read_mem_from_cache)
        pos_seq = torch.arange(klen - 1, -1, -1.0, dtype=x.dtype)
        s = torch.outer(pos_seq, self.pos_emb.inv_freq.to(x.dtype))
        r = torch.cat([s.sin(), s.cos()], -1)
        h = self.drop(x)
        hids = [h]
        for i, layer in enumerate(self.layers):
            h = layer(h, r, self.r_w_bias, self.r_r_bias, mask, None if mems is None else mems[i])
            hids.append(h)
        new_mems = None
        if mems is not None:
            new_mems = [torch.cat([c, hh], 1)[:, max(0, klen - self.mem_len):].detach()
                        for c, hh in zip(mems, hids)]
        if m and self.mem_at_end:
            pred, mem_out = h[:, -L - m:-m], h[:, -m:]
        elif m:
            pred, mem_out = h[:, -L:], h[:, -L - m:-L]
        else:
            pred, mem_out = h[:, -L:], None
        out = self.crit.out_layers[0]
        return F.linear(pred, out.weight, out.bias), mem_out, new_mems

    @torch.no_grad()
    def logits(self, inp, n_segments):
        """Logits [B, T, V] over rmt's segmentation of inp [B, T], memory and cache handed on."""
        self.eval()
        B, T = inp.shape
        mem = None if self.mem_tokens is None else self.mem_tokens.repeat(1, B, 1).transpose(0, 1)
        mems = None
        if self.mem_len > 0:
            mems = [self.r_w_bias.new_zeros(B, 0, self.d_model) for _ in range(self.n_layer + 1)]
        out = []
        for a, b in R.segment_bounds(T, n_segments):
            lg, mem, mems = self.segment(inp[:, a:b], mem, mems)
            out.append(lg)
        return torch.cat(out, 1)


def register_authors_modules():
    """Make `mem_transformer` / `proj_adaptive_softmax` importable in this process, so that
    torch.save pickles the stand-in under the authors' names."""
    for mod_name in ("mem_transformer", "proj_adaptive_softmax"):
        mod = sys.modules.setdefault(mod_name, types.ModuleType(mod_name))
        for cls in (PositionalEmbedding, PositionwiseFF, RelPartialLearnableMultiHeadAttn,
                    RelPartialLearnableDecoderLayer, AdaptiveEmbedding,
                    ProjectedAdaptiveLogSoftmax, MemTransformerLM):
            if cls.__module__ == mod_name:
                setattr(mod, cls.__name__, cls)


def authors_model(*args, seed=0, **kwargs):
    register_authors_modules()
    return MemTransformerLM(*args, **kwargs).init_for_test(seed)


def _mutate(kind):
    """Plausible bugs of an implementation, to show the golden cases catch them."""
    if kind == "no_wrap_shift":          # rel_shift without the wrap-around values
        orig = R.rel_shift

        def shifted(x):
            q, k = x.shape[-2:]
            keep = torch.tril(torch.ones(q, k, dtype=torch.bool), diagonal=k - q)
            return orig(x) * keep
        R.rel_shift = shifted
    elif kind == "mask_write_no_cache":  # write rows never see the cache
        orig = R.build_mask

        def mask(qlen, mlen, m, has_write, rfc, device=None):
            out = orig(qlen, mlen, m, has_write, rfc, device)
            if m and has_write:
                out[-m:, :mlen] = True
            return out
        R.build_mask = mask
    elif kind == "interleaved_pos":      # sin/cos interleaved instead of concatenated
        def fwd(self, pos_seq):
            s = torch.outer(pos_seq, self.inv_freq.to(pos_seq.dtype))
            return torch.stack([s.sin(), s.cos()], dim=-1).reshape(len(pos_seq), -1)
        R.PositionalEmbedding.forward = fwd
    elif kind == "bptt_k_plus_1":        # window one segment too long
        orig = R.grads_recompute
        R.grads_recompute = lambda m, i, t, N, A, k: orig(m, i, t, N, A, k + 1)
    elif kind == "delta_conv_restart":   # delta kinds: conv windows restarted every segment
        import delta_model_reference as DM
        orig = DM.DeltaModelReference.segment

        def segment(self, tok, mem, cache):
            mem = DM.DeltaState([{n: torch.zeros_like(t) if n.startswith("conv") else t
                                  for n, t in st.items()} for st in mem.layers])
            return orig(self, tok, mem, cache)
        DM.DeltaModelReference.segment = segment
    elif kind == "delta_detach_S_only":  # delta kinds: bptt 0 detaches S but not the conv windows
        import delta_model_reference as DM
        DM.DeltaState.detach = lambda self: DM.DeltaState(
            [{n: t.detach() if n == "S" else t for n, t in st.items()} for st in self.layers])
    elif kind:
        raise SystemExit(f"unknown mutant {kind}")


def lm_steps(model, inp, tgt, a):
    """Language-model steps (rmt step-dump --segment-length T): step s on segment s of every
    stream with the state the step before stored, OUT/step<s>/ the parameters it started from,
    the segment's logits, loss and gradients; with --update clip and one Adam after each step."""
    T = a.segment_length
    params = [p for _, p in model.named_parameters()]
    opt = torch.optim.Adam(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    stored = {}
    for s in range(inp.shape[1] // T):
        d = os.path.join(a.out, f"step{s}")
        os.makedirs(d)
        R.save_safetensors(os.path.join(d, "params.safetensors"), model.state_dict())
        logits, loss, grads = R.lm_step(model, inp, tgt, T, s, int(a.bptt), stored)
        np.save(os.path.join(d, "logits.npy"), logits.numpy().astype(np.float32))
        with open(os.path.join(d, "loss.json"), "w") as f:
            json.dump({"loss": float(loss)}, f)
        R.save_safetensors(os.path.join(d, "grads.safetensors"), grads)
        if a.update:      # lm_step leaves p.grad set
            torch.nn.utils.clip_grad_norm_(params, a.clip)
            opt.step()
    return 0


def main():
    torch.set_num_threads(1)   # tiny tensors (test_golden.py)
    _mutate(os.environ.get("FAKE_RMT_MUTANT", ""))
    if len(sys.argv) < 2 or sys.argv[1] != "step-dump":
        print("usage: fake_rmt.py step-dump ...", file=sys.stderr)
        return 2
    ap = argparse.ArgumentParser()
    for a in ("--checkpoint", "--input", "--target", "--bptt", "--out"):
        ap.add_argument(a, required=True)
    ap.add_argument("--segments", type=int)
    ap.add_argument("--answer-size", type=int)
    ap.add_argument("--segment-length", type=int, default=0)
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--adam-steps", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--clip", type=float, default=0.25)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--break", dest="brk", default=os.environ.get("FAKE_RMT_BREAK", ""))
    a = ap.parse_args(sys.argv[2:])
    if not a.segment_length and (a.segments is None or a.answer_size is None):
        ap.error("--segments and --answer-size are required without --segment-length")
    model = R.model_from_checkpoint(a.checkpoint, dtype=torch.float32)
    inp = torch.from_numpy(np.load(a.input))
    tgt = torch.from_numpy(np.load(a.target))
    os.makedirs(a.out, exist_ok=True)
    if a.segment_length:
        return lm_steps(model, inp, tgt, a)
    logits, loss, grads = R.loss_and_grads(model, inp, tgt, a.segments, a.answer_size, a.bptt)
    if a.brk == "logits":
        logits[0, -1, 0] += 1e-2
    if a.brk in grads:
        grads[a.brk].view(-1)[0] += 1e-3 * float(grads[a.brk].abs().max()) + 1e-6
    np.save(os.path.join(a.out, "logits.npy"), logits.numpy().astype(np.float32))
    with open(os.path.join(a.out, "loss.json"), "w") as f:
        json.dump({"loss": float(loss)}, f)
    R.save_safetensors(os.path.join(a.out, "grads.safetensors"), grads)
    if a.adam_steps > 0:
        losses, _ = R.adam_run(model, inp, tgt, a.segments, a.answer_size, a.bptt,
                               a.adam_steps, a.lr, a.clip, weight_decay=a.weight_decay)
        with open(os.path.join(a.out, "adam.json"), "w") as f:
            json.dump({"losses": losses}, f)
        R.save_safetensors(os.path.join(a.out, "after.safetensors"), model.state_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
