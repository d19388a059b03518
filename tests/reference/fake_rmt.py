#!/usr/bin/python3
"""Stand-in for `rmt step-dump`, computed by the reference in float32.

Only for exercising test_golden.py before the C++ exists, and for showing
that the tolerances hold for an fp32 implementation:
    /usr/bin/python3 tests/reference/test_golden.py --rmt tests/reference/fake_rmt.py
(`--break NAME` / FAKE_RMT_BREAK perturbs one output, and FAKE_RMT_MUTANT
selects a plausible implementation bug, to see the driver fail.)
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rmt_reference as R  # noqa: E402


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
    elif kind:
        raise SystemExit(f"unknown mutant {kind}")


def main():
    _mutate(os.environ.get("FAKE_RMT_MUTANT", ""))
    if len(sys.argv) < 2 or sys.argv[1] != "step-dump":
        print("usage: fake_rmt.py step-dump ...", file=sys.stderr)
        return 2
    ap = argparse.ArgumentParser()
    for a in ("--checkpoint", "--input", "--target", "--bptt", "--out"):
        ap.add_argument(a, required=True)
    ap.add_argument("--segments", type=int, required=True)
    ap.add_argument("--answer-size", type=int, required=True)
    ap.add_argument("--adam-steps", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--clip", type=float, default=0.25)
    ap.add_argument("--break", dest="brk", default=os.environ.get("FAKE_RMT_BREAK", ""))
    a = ap.parse_args(sys.argv[2:])
    model = R.model_from_checkpoint(a.checkpoint, dtype=torch.float32)
    inp = torch.from_numpy(np.load(a.input))
    tgt = torch.from_numpy(np.load(a.target))
    os.makedirs(a.out, exist_ok=True)
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
                               a.adam_steps, a.lr, a.clip)
        with open(os.path.join(a.out, "adam.json"), "w") as f:
            json.dump({"losses": losses}, f)
        R.save_safetensors(os.path.join(a.out, "after.safetensors"), model.state_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
