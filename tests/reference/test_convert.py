#!/usr/bin/python3
"""apps/convert_authors_checkpoint.py: checkpoints saved by the authors' code (torch.save of a
state_dict, or of the whole model) convert into rmt checkpoints that rmt runs to the same loss.

    /usr/bin/python3 tests/reference/test_convert.py --rmt PATH_TO_RMT
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rmt_reference as R  # noqa: E402

CONVERTER = os.path.join(HERE, "..", "..", "apps", "convert_authors_checkpoint.py")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rmt", required=True)
    rmt = p.parse_args().rmt
    torch.manual_seed(0)
    passed = failed = 0
    for kind, mem_len, m, how in [("rmt", 0, 3, "state_dict"), ("xl", 4, 0, "model"),
                                  ("xl_rmt", 4, 3, "state_dict")]:
        model = R.RMTReference(kind, 12, 2, 2, 8, 16, 32, mem_len=mem_len, num_mem_tokens=m)
        model.init_params(w_std=0.1, ln_w_std=0.1, bias_std=0.1)
        model = model.float()
        inp = torch.randint(0, 12, (3, 12))
        tgt = torch.randint(0, 12, (3, 12))
        _, ref_loss, _ = R.loss_and_grads(model.double(), inp, tgt, 3, 6, "all")
        with tempfile.TemporaryDirectory() as tmp:
            pt = os.path.join(tmp, "authors.pt")
            torch.save(model.state_dict() if how == "state_dict" else model, pt)
            st = os.path.join(tmp, "converted.safetensors")
            cmd = [sys.executable, CONVERTER, pt, st, "--kind", kind, "--dropout", "0"]
            if mem_len:
                cmd += ["--mem-len", str(mem_len)]
            conv = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=HERE))
            np.save(os.path.join(tmp, "in.npy"), inp.numpy().astype("<i8"))
            np.save(os.path.join(tmp, "tg.npy"), tgt.numpy().astype("<i8"))
            out = os.path.join(tmp, "out")
            run = subprocess.run([rmt, "step-dump", "--checkpoint", st, "--input", os.path.join(tmp, "in.npy"),
                                  "--target", os.path.join(tmp, "tg.npy"), "--segments", "3",
                                  "--answer-size", "6", "--out", out], capture_output=True, text=True)
            ok = conv.returncode == 0 and run.returncode == 0
            got = None
            if ok:
                with open(os.path.join(out, "loss.json")) as f:
                    got = json.load(f)["loss"]
                ok = abs(got - float(ref_loss)) <= 1e-4 * abs(float(ref_loss))
            print(f"{'PASS' if ok else 'FAIL'} convert {kind} ({how}): reference loss {float(ref_loss):.6f}, rmt {got}")
            if not ok:
                print(conv.stdout, conv.stderr, run.stderr)
            passed += ok
            failed += not ok
    # a checkpoint that is not a MemTransformerLM is refused with a clear message
    with tempfile.TemporaryDirectory() as tmp:
        pt = os.path.join(tmp, "other.pt")
        torch.save({"weight": torch.zeros(2)}, pt)
        r = subprocess.run([sys.executable, CONVERTER, pt, os.path.join(tmp, "x.safetensors"), "--kind", "rmt"],
                           capture_output=True, text=True)
        ok = r.returncode != 0 and "word_emb.emb_layers.0.weight" in r.stderr
        print(f"{'PASS' if ok else 'FAIL'} convert refuses a non-MemTransformerLM checkpoint")
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
