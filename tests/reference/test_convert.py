#!/usr/bin/python3
"""apps/convert_authors_checkpoint.py: the authors' checkpoints (a pickled MemTransformerLM, or a
state_dict plus the settings) convert into rmt checkpoints that `rmt step-dump` runs to the same
logits as the authors' forward (fake_rmt.authors_model, a stand-in of their model); contradicting
options, a state_dict without its settings, settings rmt does not implement and bad files are
refused with one clear line, exit 1, and nothing written.

    /usr/bin/python3 tests/reference/test_convert.py --rmt PATH_TO_RMT
"""
import argparse
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_rmt as F  # noqa: E402

CONVERTER = os.path.join(HERE, "..", "..", "apps", "convert_authors_checkpoint.py")
_spec = importlib.util.spec_from_file_location("convert_authors_checkpoint", CONVERTER)
conv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conv)

SIZES = (12, 2, 2, 8, 16, 32)   # n_token, n_layer, n_head, d_model, d_head, d_inner
SEGMENTS, ANSWER = 3, 6
results = {"passed": 0, "failed": 0}


def check(ok, what, detail=""):
    print(f"{'PASS' if ok else 'FAIL'} {what}" + (f": {detail}" if detail and not ok else ""))
    results["passed" if ok else "failed"] += 1
    return ok


def convert(args):
    """The converter in this process (fast); returns (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = conv.main([str(a) for a in args])
        except SystemExit as e:   # argparse usage errors
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def rmt_logits(rmt, st, inp, tgt, tmp):
    np.save(os.path.join(tmp, "in.npy"), inp.numpy().astype("<i8"))
    np.save(os.path.join(tmp, "tg.npy"), tgt.numpy().astype("<i8"))
    out = os.path.join(tmp, "dump")
    r = subprocess.run([rmt, "step-dump", "--checkpoint", st, "--input", os.path.join(tmp, "in.npy"),
                        "--target", os.path.join(tmp, "tg.npy"), "--segments", str(SEGMENTS),
                        "--answer-size", str(ANSWER), "--out", out], capture_output=True, text=True)
    if r.returncode != 0:
        return None, None, r.stderr
    with open(os.path.join(out, "loss.json")) as f:
        loss = json.load(f)["loss"]
    return torch.from_numpy(np.load(os.path.join(out, "logits.npy"))).double(), loss, ""


def reference(model, inp, tgt):
    """The authors' forward in float64 on the model's (float32) weights; logits and answer loss."""
    import copy
    lg = copy.deepcopy(model).double().logits(inp, SEGMENTS)
    V = lg.shape[-1]
    loss = torch.nn.functional.cross_entropy(lg[:, -ANSWER:].reshape(-1, V), tgt[:, -ANSWER:].reshape(-1))
    return lg, float(loss)


def rel_diff(a, b):
    return float((a - b).abs().max() / b.abs().max())


def metadata(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n))["__metadata__"]


# the settings of the authors' MemTransformerLM -> the rmt kind it must become
EQUIVALENT = [
    ("baseline", dict()),
    ("xl", dict(mem_len=4)),
    ("xl", dict(mem_len=20)),                                   # cache longer than a segment
    ("rmt", dict(num_mem_tokens=3, mem_at_end=True)),
    ("mt", dict(num_mem_tokens=3, mem_at_end=False)),           # the train scripts' default
    ("xl_rmt", dict(mem_len=4, num_mem_tokens=3, mem_at_end=True, read_mem_from_cache=False)),
    ("xl_rmt", dict(mem_len=4, num_mem_tokens=3, mem_at_end=True, read_mem_from_cache=True)),
]


def test_equivalence(rmt, tmp, inp, tgt):
    refs = {}
    for i, (kind, settings) in enumerate(EQUIVALENT):
        model = F.authors_model(*SIZES, seed=i, **settings)
        ref, ref_loss = reference(model, inp, tgt)
        name = f"{kind} {settings}"
        refs[name] = (model, ref)
        for how in ("model", "state_dict"):
            pt, st = os.path.join(tmp, f"a{i}{how}.pt"), os.path.join(tmp, f"a{i}{how}.safetensors")
            torch.save(model if how == "model" else model.state_dict(), pt)
            opts = []
            if how == "state_dict":   # the settings, given explicitly
                opts = ["--mem-len", settings.get("mem_len", 0)]
                if settings.get("num_mem_tokens"):
                    opts += ["--mem-at-end", str(settings["mem_at_end"]).lower()]
                    if settings.get("mem_len"):
                        opts += ["--read-mem-from-cache", str(settings["read_mem_from_cache"]).lower()]
            rc, out, err = convert([pt, st] + opts)
            if not check(rc == 0 and metadata(st)["kind"] == kind, f"convert {name} ({how}) -> {kind}",
                         err or out):
                continue
            got, loss, err = rmt_logits(rmt, st, inp, tgt, tmp)
            ok = got is not None and rel_diff(got, ref) <= 1e-4 and abs(loss - ref_loss) <= 1e-4 * abs(ref_loss)
            d = f"{rel_diff(got, ref):.1e}" if got is not None else "-"
            check(ok, f"  rmt step-dump = the authors' forward ({how}): logits max|diff|/max|ref| {d}",
                  err or f"loss {loss} vs {ref_loss}")
    # the settings matter: the same weights under the other setting give other logits, so the
    # checks above could not pass with the settings ignored
    for a, b in [(3, 4), (5, 6)]:
        na, nb = (f"{EQUIVALENT[j][0]} {EQUIVALENT[j][1]}" for j in (a, b))
        model_b = F.authors_model(*SIZES, seed=a, **EQUIVALENT[b][1])
        lg_b, _ = reference(model_b, inp, tgt)
        d = rel_diff(lg_b, refs[na][1])
        check(d > 1e-2, f"the setting matters: {na} vs {nb} on the same weights differ by {d:.2f}")


def test_cpu_only_unpickling(tmp):
    """The authors' module cannot be imported on a CPU-only PyTorch (it reads torch.version.cuda
    at import): with modules of their names that fail to import on the path, a pickled model still
    converts (stand-ins replace their classes), in a separate process as a user runs it."""
    fake = os.path.join(tmp, "authors_pytorch")
    os.makedirs(fake)
    for mod in ("mem_transformer", "proj_adaptive_softmax"):
        with open(os.path.join(fake, mod + ".py"), "w") as f:
            f.write("raise ImportError('like the authors\\' module on a CPU-only PyTorch: "
                    "torch.version.cuda is None')\n")
    model = F.authors_model(*SIZES, mem_len=4, num_mem_tokens=3, mem_at_end=True)
    pt, st = os.path.join(tmp, "cpu.pt"), os.path.join(tmp, "cpu.safetensors")
    torch.save(model, pt)
    env = dict(os.environ, PYTHONPATH=fake)
    probe = subprocess.run([sys.executable, "-c", "import mem_transformer"], env=env, capture_output=True)
    check(probe.returncode != 0, "the authors' module stand-in does not import (the CPU-only case)")
    r = subprocess.run([sys.executable, CONVERTER, pt, st], env=env, capture_output=True, text=True)
    check(r.returncode == 0 and metadata(st)["kind"] == "xl_rmt",
          "a pickled model converts without importing the authors' code", r.stderr)


def modified(settings=None, attrs=None, sd_edit=None):
    model = F.authors_model(*SIZES, **(settings or {}))
    for path, value in (attrs or {}).items():
        obj = model
        *mods, name = path.split(".")
        for m in mods:
            obj = getattr(obj, m) if not m.isdigit() else obj[int(m)]
        setattr(obj, name, value)
    if sd_edit is None:
        return model
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    sd_edit(sd)
    return sd


def test_refusals(tmp):
    xl_rmt = dict(mem_len=4, num_mem_tokens=3, mem_at_end=True, read_mem_from_cache=False)
    rmt_s = dict(num_mem_tokens=3, mem_at_end=True)
    mt = dict(num_mem_tokens=3, mem_at_end=False)

    def nan(sd):
        sd["layers.1.dec_attn.qkv_net.weight"][0, 0] = float("nan")

    def untie(sd):
        sd["crit.out_layers.0.weight"] = sd["crit.out_layers.0.weight"] + 0.5

    cases = [  # (what, object to save, options, expected message)
        ("an option contradicting the model (read_mem_from_cache)", modified(xl_rmt),
         ["--read-mem-from-cache", "true"],
         "--read-mem-from-cache true contradicts the model's read_mem_from_cache = false"),
        ("an option contradicting the model (mem_len)", modified(dict(mem_len=4)), ["--mem-len", 8],
         "--mem-len 8 contradicts the model's mem_len = 4"),
        ("an option contradicting the model (mem_at_end)", modified(mt), ["--mem-at-end", "true"],
         "--mem-at-end true contradicts the model's mem_at_end = false"),
        ("--kind contradicting the model", modified(mt), ["--kind", "rmt"],
         "--kind rmt contradicts the checkpoint: 3 memory tokens, mem_len 0, mem_at_end false: that makes it mt"),
        ("a state_dict without --mem-len", modified(xl_rmt).state_dict(), [],
         "a state_dict does not record mem_len: pass --mem-len"),
        ("a state_dict with memory tokens without --mem-at-end", modified(rmt_s).state_dict(),
         ["--mem-len", 0], "a state_dict does not record mem_at_end: pass --mem-at-end"),
        ("a state_dict with memory and cache without --read-mem-from-cache",
         modified(xl_rmt).state_dict(), ["--mem-len", 4, "--mem-at-end", "true"],
         "a state_dict does not record read_mem_from_cache: pass --read-mem-from-cache"),
        ("a pickled model missing a setting", modified(rmt_s, attrs={"mem_at_end": None}), [],
         "the pickled model does not record mem_at_end: pass --mem-at-end"),
        ("same_length", modified(attrs={"same_length": True}), [], "same_length = True"),
        ("clamp_len", modified(attrs={"clamp_len": 8}), [], "clamp_len = 8; rmt does not clamp"),
        ("ext_len", modified(attrs={"ext_len": 2}), [], "ext_len = 2"),
        ("attn_type", modified(attrs={"attn_type": 2}), [], "attn_type = 2"),
        ("sample_softmax", modified(attrs={"sample_softmax": 8}), [], "sample_softmax = 8"),
        ("pre_lnorm", modified(attrs={"layers.1.pos_ff.pre_lnorm": True}), [],
         "layers.1.pos_ff.pre_lnorm = True; rmt's layers are post-LayerNorm"),
        ("div_val", modified(attrs={"word_emb.div_val": 4}), [], "word_emb.div_val = 4"),
        ("memory in front plus a cache", modified(dict(mem_len=4, num_mem_tokens=3, mem_at_end=False)),
         [], "rmt has no such model"),
        ("num_mem_tokens contradicting mem_tokens", modified(rmt_s, attrs={"num_mem_tokens": 5}), [],
         "num_mem_tokens is 5 but its mem_tokens tensor has 3 rows"),
        ("an untied output layer", modified(sd_edit=untie), ["--mem-len", 0],
         "'crit.out_layers.0.weight' differs from the embedding"),
        ("an output projection", modified(sd_edit=lambda sd: sd.update({"crit.out_projs_0": torch.zeros(8, 8)})),
         ["--mem-len", 0], "tensor 'crit.out_projs_0' belongs to an output projection"),
        ("a missing tensor", modified(sd_edit=lambda sd: sd.pop("layers.1.pos_ff.CoreNet.3.bias")),
         ["--mem-len", 0], "no tensor 'layers.1.pos_ff.CoreNet.3.bias'"),
        ("a wrong shape", modified(sd_edit=lambda sd: sd.update({"r_r_bias": torch.zeros(2, 7)})),
         ["--mem-len", 0], "tensor 'r_r_bias' has shape [2, 7], expected [2, 16]"),
        ("NaN weights", modified(sd_edit=nan), ["--mem-len", 0],
         "tensor 'layers.1.dec_attn.qkv_net.weight' holds NaN or Inf"),
        ("an integer tensor", modified(sd_edit=lambda sd: sd.update({"r_w_bias": torch.zeros(2, 16, dtype=torch.long)})),
         ["--mem-len", 0], "tensor 'r_w_bias' has dtype torch.int64"),
        ("a checkpoint of another model", {"weight": torch.zeros(2)}, ["--mem-len", 0],
         "no tensor 'word_emb.emb_layers.0.weight': not a MemTransformerLM (its tensors: weight)"),
        ("a dict that is not a state_dict", {"epoch": 3, "lr": 0.1}, [],
         "holds a dict with non-tensor entries (epoch, lr)"),
        ("a pickled list", [1, 2], [], "holds a list, neither"),
        ("a pickle of another class (not run)", argparse.Namespace(x=1), [],
         "the pickle refers to argparse.Namespace"),
        ("the authors' other class", modified().crit, [], "holds a pickled the authors' ProjectedAdaptiveLogSoftmax"),
    ]
    for i, (what, obj, opts, msg) in enumerate(cases):
        pt = os.path.join(tmp, f"bad{i}.pt")
        torch.save(obj, pt)
        expect_failure(what, [pt, os.path.join(tmp, f"bad{i}.safetensors")] + opts, msg)

    good = os.path.join(tmp, "good.pt")
    torch.save(modified(), good)
    with open(good, "rb") as f:
        raw = f.read()
    files = {"empty": b"", "random": bytes(np.random.default_rng(1).integers(0, 256, 3000, dtype=np.uint8)),
             "truncated": raw[:len(raw) // 2], "text": b"hello, not a checkpoint\n"}
    for name, data in files.items():
        p = os.path.join(tmp, f"{name}.pt")
        with open(p, "wb") as f:
            f.write(data)
        expect_failure(f"a {name} file", [p, os.path.join(tmp, f"{name}.safetensors")],
                       "empty file, not a PyTorch checkpoint" if name == "empty"
                       else "not a readable PyTorch checkpoint")
    expect_failure("a missing input", [os.path.join(tmp, "nope.pt"), os.path.join(tmp, "n.safetensors")],
                   "no such file")
    expect_failure("an output in a missing directory", [good, os.path.join(tmp, "no", "dir", "x.safetensors")],
                   "does not exist")
    expect_failure("the output = the input", [good, good], "the output would overwrite the input",
                   output_may_exist=True)
    with open(good, "rb") as f:
        check(f.read() == raw, "the input is left as it was")
    for bad in ["1.5", "-0.1", "nan"]:
        expect_failure(f"--dropout {bad} (out of range: one line, exit 1)",
                       [good, os.path.join(tmp, "d.safetensors"), "--dropout", bad], "--dropout must be in [0, 1)")
    rc, _, err = convert([good, os.path.join(tmp, "u.safetensors"), "--mem-at-end", "maybe"])
    check(rc == 2 and "expected true or false" in err, "a bad --mem-at-end value is a usage error (2)", err)
    check(not [f for f in os.listdir(tmp) if ".tmp." in f], "no temp file left behind")
    # a failed conversion leaves an existing output as it was
    out = os.path.join(tmp, "keep.safetensors")
    with open(out, "wb") as f:
        f.write(b"old")
    convert([os.path.join(tmp, "random.pt"), out])
    with open(out, "rb") as f:
        check(f.read() == b"old", "a failed conversion leaves the existing output untouched")


def expect_failure(what, args, msg, output_may_exist=False):
    rc, out, err = convert(args)
    lines = err.strip().splitlines()
    ok = (rc == 1 and len(lines) == 1 and lines[0].startswith("convert_authors_checkpoint.py: error: ")
          and msg in lines[0] and "Traceback" not in err
          and (output_may_exist or not os.path.exists(str(args[1]))))
    check(ok, f"refuses {what}", f"status {rc}, stderr {err!r}, expected {msg!r}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rmt", required=True)
    rmt = p.parse_args().rmt
    g = torch.Generator().manual_seed(0)
    inp = torch.randint(0, SIZES[0], (3, 12), generator=g)
    tgt = torch.randint(0, SIZES[0], (3, 12), generator=g)
    with tempfile.TemporaryDirectory() as tmp:
        test_equivalence(rmt, tmp, inp, tgt)
    with tempfile.TemporaryDirectory() as tmp:
        test_cpu_only_unpickling(tmp)
    with tempfile.TemporaryDirectory() as tmp:
        test_refusals(tmp)
    print(f"{results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)


if __name__ == "__main__":
    main()
