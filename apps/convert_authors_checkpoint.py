#!/usr/bin/env python3
"""Convert a checkpoint written by the authors' code (booydar/LM-RMT, `pytorch/`: `torch.save(model)`
of a MemTransformerLM, or `torch.save(model.state_dict())`) into an rmt checkpoint (safetensors,
fp32, the model config in __metadata__).

    python3 apps/convert_authors_checkpoint.py model.pt out.safetensors
    python3 apps/convert_authors_checkpoint.py state_dict.pt out.safetensors --mem-len N \\
        [--mem-at-end true|false] [--read-mem-from-cache true|false]

Where each setting comes from:
  - sizes (n_token, n_layer, n_head, d_head, d_model, d_inner, memory tokens): the tensors.
  - mem_len, mem_at_end, read_mem_from_cache: a pickled model's attributes. A state_dict does not
    record them, so they must be given: --mem-len always, --mem-at-end when there are memory
    tokens, --read-mem-from-cache when there are memory tokens and mem_len > 0. An option that
    contradicts a pickled model is refused. (The authors' train scripts default to --mem_len 0 and
    leave --mem_at_end and --read_mem_from_cache off.)
  - the model kind follows: no memory tokens -> baseline (mem_len 0) or xl; memory tokens with
    mem_at_end -> rmt (mem_len 0) or xl_rmt; without mem_at_end -> mt (mem_len 0 only).
    --kind, if given, is only checked against that.
  - what rmt implements one way only must have that value, else the conversion is refused:
    attn_type 0, post-LayerNorm (pre_lnorm off), same_length off, clamp_len <= 0, ext_len 0,
    tied output layer, no adaptive softmax / embedding (div_val 1, no cutoffs, d_embed = d_model),
    no sampled softmax. A pickled model is checked; a state_dict is checked where its tensors tell
    (tying, projections, clusters) and otherwise assumed to have the authors' defaults (said on
    stderr).
  - dropout, dropatt: recorded for further training only (no effect on evaluation); from the
    model, or 0.0 for a state_dict; --dropout overrides.

A pickled model is read without the authors' code: their classes are replaced by plain stand-ins
while unpickling (their module does not even import on a CPU-only PyTorch: it reads
torch.version.cuda), and the pickle may refer to nothing but PyTorch, numpy and those classes.
Still, unpickle only files you trust. Needs torch and numpy. Errors: one line, exit 1 (an option
argparse cannot parse: the usage and exit 2); the output is written atomically (temp file, fsync, rename) and only after every check has passed.
"""
import _compat_pickle
import argparse
import json
import math
import os
import pickle
import struct
import sys
import types

PROG = "convert_authors_checkpoint.py"


class ConvertError(Exception):
    pass


def fail(msg):
    raise ConvertError(msg)


try:
    import numpy as np
    import torch
    import torch.nn as nn
except ImportError as e:  # a clear message rather than a traceback
    sys.stderr.write(f"{PROG}: error: needs PyTorch and numpy ({e}); on Debian: sudo apt-get install "
                     "python3-torch python3-numpy, and run it with /usr/bin/python3\n")
    sys.exit(1)


# --------------------------------------------------------------------------------------------
# reading the file

# The authors' modules, as pickles name them (`mem_transformer`, or `pytorch.mem_transformer`, ...).
AUTHORS_MODULES = {"mem_transformer", "proj_adaptive_softmax", "log_uniform_sampler",
                   "adaptive_softmax", "data_parallel"}
SAFE_GLOBALS = {("collections", "OrderedDict"), ("copyreg", "_reconstructor"),
                ("copyreg", "__newobj__"), ("_codecs", "encode")} | {
    ("builtins", n) for n in ("object", "set", "frozenset", "list", "dict", "tuple", "slice", "range",
                              "int", "float", "bool", "str", "bytes", "bytearray", "complex")}
NUMPY_GLOBALS = {"scalar", "_reconstruct", "dtype", "ndarray"}


class AuthorsStandIn(nn.Module):
    """Takes the place of one of the authors' classes while unpickling: nn.Module's own
    __setstate__ restores the attributes, parameters, buffers and submodules; nothing runs."""

    def forward(self, *args, **kwargs):
        raise RuntimeError("a stand-in for the authors' class cannot run")


_stand_ins = {}


def stand_in(module, name):
    key = (module, name)
    if key not in _stand_ins:
        _stand_ins[key] = type(name, (AuthorsStandIn,), {"__module__": f"authors.{module}"})
    return _stand_ins[key]


class RestrictedUnpickler(pickle.Unpickler):
    used = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        RestrictedUnpickler.used = True

    def find_class(self, module, name):
        if (module, name) in _compat_pickle.NAME_MAPPING:  # Python 2 names (pickle protocol 2)
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        last = module.rsplit(".", 1)[-1]
        if last in AUTHORS_MODULES:
            return stand_in(last, name)
        if module == "torch" or module.startswith("torch."):
            return super().find_class(module, name)
        if (module, name) in SAFE_GLOBALS:
            return super().find_class(module, name)
        if module.split(".")[0] == "numpy" and name in NUMPY_GLOBALS:
            return super().find_class(module, name)
        raise ConvertError(
            f"the pickle refers to {module}.{name}, which is neither PyTorch's, numpy's nor the "
            "authors' MemTransformerLM's; save model.state_dict() instead and pass the settings")


def restricted_pickle_module():
    """A module that looks like `pickle` but unpickles with RestrictedUnpickler; anything else
    is the real pickle's."""
    mod = types.ModuleType("restricted_pickle")
    mod.Unpickler = RestrictedUnpickler
    mod.UnpicklingError = pickle.UnpicklingError
    mod.load = lambda f, **kw: RestrictedUnpickler(f, **kw).load()
    mod.__getattr__ = lambda name: getattr(pickle, name)
    return mod


def torch_load_restricted(path):
    """torch.load through RestrictedUnpickler. PyTorch 1.13 ignores pickle_module unless
    weights_only is set, and uses its module's global `pickle`: that is swapped for the call."""
    import torch.serialization as ts
    mod = restricted_pickle_module()
    RestrictedUnpickler.used = False
    saved = ts.pickle
    ts.pickle = mod
    try:
        try:
            result = torch.load(path, map_location="cpu", pickle_module=mod, weights_only=False)
        except TypeError as e:  # a PyTorch without weights_only
            if "weights_only" not in str(e):
                raise
            result = torch.load(path, map_location="cpu", pickle_module=mod)
    finally:
        ts.pickle = saved
    if not RestrictedUnpickler.used:
        raise RuntimeError("this PyTorch bypassed the restricted unpickler; refusing to unpickle")
    return result


def load_file(path):
    if not os.path.exists(path):
        fail(f"{path}: no such file")
    if not os.path.isfile(path):
        fail(f"{path}: not a regular file")
    if os.path.getsize(path) == 0:
        fail(f"{path}: empty file, not a PyTorch checkpoint")
    try:
        return torch_load_restricted(path)
    except ConvertError as e:
        fail(f"{path}: {e}")
    except MemoryError:
        fail(f"{path}: not a readable PyTorch checkpoint (out of memory while unpickling)")
    except Exception as e:  # torch.load raises many types for corrupt input
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        fail(f"{path}: not a readable PyTorch checkpoint ({reason})")


def module_tensors(mod, prefix=""):
    """The state_dict of an unpickled module, collected from its fields (version-independent)."""
    out = {}
    d = mod.__dict__
    non_persistent = d.get("_non_persistent_buffers_set", set())
    for name, p in d.get("_parameters", {}).items():
        if p is not None:
            out[prefix + name] = p
    for name, b in d.get("_buffers", {}).items():
        if b is not None and name not in non_persistent:
            out[prefix + name] = b
    for name, sub in d.get("_modules", {}).items():
        if sub is not None:
            out.update(module_tensors(sub, prefix + name + "."))
    return out


def find_model(obj, path):
    """Returns (tensors, model or None, what) for a pickled MemTransformerLM or a state_dict."""
    if isinstance(obj, nn.Module):
        inner = obj.__dict__.get("_modules", {}).get("module")
        if type(obj).__name__.endswith("DataParallel") and inner is not None:
            obj = inner
        name = type(obj).__name__
        if not isinstance(obj, AuthorsStandIn) or name != "MemTransformerLM":
            where = "the authors' " if isinstance(obj, AuthorsStandIn) else ""
            fail(f"{path}: holds a pickled {where}{name}, not the authors' MemTransformerLM; "
                 "save model.state_dict() instead and pass the settings")
        return module_tensors(obj), obj, "the pickled model"
    if isinstance(obj, dict):
        for key in ("state_dict", "model_state_dict", "model"):
            if key in obj and (isinstance(obj[key], (dict, nn.Module))):
                return find_model(obj[key], path)
        others = [str(k) for k, v in obj.items() if not torch.is_tensor(v)]
        if others:
            fail(f"{path}: holds a dict with non-tensor entries ({', '.join(sorted(others)[:4])}), "
                 "not a state_dict")
        return dict(obj), None, "a state_dict"
    fail(f"{path}: holds a {type(obj).__name__}, neither the authors' MemTransformerLM nor a state_dict")


# --------------------------------------------------------------------------------------------
# settings


MISSING = object()


def attr(mod, name):
    return mod.__dict__.get(name, MISSING) if mod is not None else MISSING


def submodule(mod, *names):
    for n in names:
        if mod is None:
            return None
        mod = mod.__dict__.get("_modules", {}).get(n)
    return mod


def as_float(x):
    """A dropout module's p, or a plain number."""
    if isinstance(x, nn.Module):
        x = x.__dict__.get("p", 0.0)
    return float(x) if isinstance(x, (int, float)) else 0.0


def check_unsupported(model, n_layer):
    """Settings rmt implements one way only (MemTransformerLM's constructor arguments)."""
    def need(name, ok, value, why):
        if value is not MISSING and value is not None and not ok(value):
            fail(f"the model has {name} = {value!r}; {why}")
    need("attn_type", lambda v: v == 0, attr(model, "attn_type"),
         "rmt implements only attn_type 0 (relative positions with learnable u, v)")
    need("same_length", lambda v: not v, attr(model, "same_length"),
         "rmt's attention is causal over the whole cache (same_length off), and with same_length "
         "the authors' code also drops the memory tokens' mask")
    need("clamp_len", lambda v: v <= 0, attr(model, "clamp_len"),
         "rmt does not clamp relative positions (clamp_len -1)")
    need("ext_len", lambda v: v == 0, attr(model, "ext_len"),
         "rmt has no extended context (ext_len 0)")
    need("sample_softmax", lambda v: v <= 0, attr(model, "sample_softmax"),
         "rmt has no sampled softmax")
    for i in range(n_layer):
        for part in ("dec_attn", "pos_ff"):
            need(f"layers.{i}.{part}.pre_lnorm", lambda v: not v,
                 attr(submodule(model, "layers", str(i), part), "pre_lnorm"),
                 "rmt's layers are post-LayerNorm (pre_lnorm off)")
    emb = submodule(model, "word_emb")
    need("word_emb.div_val", lambda v: v == 1, attr(emb, "div_val"),
         "rmt has no adaptive embedding (div_val 1)")
    cut = attr(emb, "cutoffs")
    need("word_emb.cutoffs", lambda v: len(v) <= 1, cut,
         "rmt has no adaptive softmax (no cutoffs)")
    d_embed, d_proj = attr(emb, "d_embed"), attr(emb, "d_proj")
    if d_embed is not MISSING and d_proj is not MISSING and d_embed != d_proj:
        fail(f"the model has d_embed {d_embed} != d_model {d_proj}; rmt's embedding has width d_model")


def resolve(name, flag, model, option, needed, hint):
    """A setting from the pickled model's attribute, else from the option; a contradiction or a
    missing needed value is an error."""
    value = attr(model, name)
    if value is not MISSING and value is not None:
        if option is not None and option != value:
            fail(f"{flag} {fmt(option)} contradicts the model's {name} = {fmt(value)}; leave {flag} "
                 "out (a pickled model's settings are used)")
        return value, "model"
    if option is not None:
        return option, "option"
    if needed:
        src = "a state_dict does not record" if model is None else "the pickled model does not record"
        fail(f"{src} {name}: pass {flag} {hint}")
    return None, "unused"


def fmt(v):
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def settings(model, m, args):
    mem_len, mem_len_src = resolve(
        "mem_len", "--mem-len", model, args.mem_len, True,
        "N (the Transformer-XL cache length; 0 for none; the authors' --mem_len, default 0)")
    if hasattr(mem_len, "__index__") and not isinstance(mem_len, bool):
        mem_len = int(mem_len)  # e.g. a numpy integer
    if not isinstance(mem_len, int) or isinstance(mem_len, bool) or mem_len < 0:
        fail(f"mem_len must be a non-negative integer, got {mem_len!r}")
    mem_at_end, mae_src = resolve(
        "mem_at_end", "--mem-at-end", model, args.mem_at_end, m > 0,
        "true|false (true: memory is also written at the segment's end, RMT; false: memory tokens "
        "only in front, MemTransformer; the authors' --mem_at_end flag, off by default)")
    read_cache, rmc_src = resolve(
        "read_mem_from_cache", "--read-mem-from-cache", model, args.read_mem_from_cache,
        m > 0 and mem_len > 0,
        "true|false (whether memory tokens attend to the Transformer-XL cache; the authors' "
        "--read_mem_from_cache flag, off by default)")
    n_attr = attr(model, "num_mem_tokens")
    if n_attr is not MISSING and n_attr is not None and n_attr != m:
        fail(f"the model's num_mem_tokens is {n_attr} but its mem_tokens tensor has {m} rows")
    if m == 0:
        kind = "xl" if mem_len > 0 else "baseline"
    elif mem_at_end:
        kind = "xl_rmt" if mem_len > 0 else "rmt"
    elif mem_len > 0:
        fail(f"memory tokens only in front (mem_at_end false) together with a Transformer-XL cache "
             f"(mem_len {mem_len}): rmt has no such model (its xl_rmt writes memory at the end)")
    else:
        kind = "mt"
    if args.kind is not None and args.kind != kind:
        fail(f"--kind {args.kind} contradicts the checkpoint: {m} memory tokens, mem_len {mem_len}"
             + (f", mem_at_end {fmt(bool(mem_at_end))}" if m else "") + f": that makes it {kind}")
    return {"kind": kind, "mem_len": mem_len if kind in ("xl", "xl_rmt") else 0,
            "read_mem_from_cache": bool(read_cache) if read_cache is not None else False,
            "mem_at_end": mem_at_end}, {"mem_len": mem_len_src, "mem_at_end": mae_src,
                                        "read_mem_from_cache": rmc_src}


# --------------------------------------------------------------------------------------------
# tensors


def shape_of(sd, name, dims):
    if name not in sd:
        fail(f"the checkpoint has no tensor '{name}'")
    s = list(sd[name].shape)
    if len(s) != dims:
        fail(f"tensor '{name}' has shape {s}, expected {dims} dimensions")
    return s


UNSUPPORTED_TENSORS = [
    ("word_emb.emb_projs", "an embedding projection (d_embed != d_model or div_val > 1)"),
    ("word_emb.emb_layers.", "an adaptive embedding (cutoffs / div_val)"),
    ("crit.out_projs", "an output projection (d_embed != d_model or div_val > 1)"),
    ("crit.cluster_", "an adaptive softmax (cutoffs)"),
    ("crit.out_layers.", "an adaptive softmax (cutoffs)"),
    ("out_layer.", "a sampled softmax (sample_softmax > 0)"),
    ("r_emb", "learnable relative embeddings (attn_type 1 or 3)"),
    ("r_bias", "learnable relative embeddings (attn_type 1)"),
]


def config_from_tensors(sd):
    if "word_emb.emb_layers.0.weight" not in sd:
        names = ", ".join(sorted(sd)[:5]) or "none"
        fail(f"the checkpoint has no tensor 'word_emb.emb_layers.0.weight': not a MemTransformerLM "
             f"(its tensors: {names})")
    V, d = shape_of(sd, "word_emb.emb_layers.0.weight", 2)
    if "r_w_bias" in sd and sd["r_w_bias"].dim() == 3:
        fail("tensor 'r_w_bias' has 3 dimensions: a model with attn_type 1, rmt implements attn_type 0")
    H, D = shape_of(sd, "r_w_bias", 2)
    di = shape_of(sd, "layers.0.pos_ff.CoreNet.0.weight", 2)[0]
    layer_ids = set()
    for k in sd:
        if k.startswith("layers."):
            idx = k.split(".")[1]
            if not idx.isdigit():
                fail(f"unexpected tensor '{k}'")
            layer_ids.add(int(idx))
    L = max(layer_ids) + 1
    if layer_ids != set(range(L)):
        fail(f"layers {sorted(set(range(L)) - layer_ids)} have no tensors (the layers run 0..{L - 1})")
    m = shape_of(sd, "mem_tokens", 3)[0] if "mem_tokens" in sd else 0
    if d % 2:
        fail(f"d_model {d} is odd; rmt's positional encoding needs an even d_model")
    HD = H * D
    expected = {"word_emb.emb_layers.0.weight": [V, d], "crit.out_layers.0.weight": [V, d],
                "crit.out_layers.0.bias": [V], "r_w_bias": [H, D], "r_r_bias": [H, D],
                "pos_emb.inv_freq": [d // 2]}
    if m:
        expected["mem_tokens"] = [m, 1, d]
    for i in range(L):
        p = f"layers.{i}."
        expected.update({
            p + "dec_attn.qkv_net.weight": [3 * HD, d], p + "dec_attn.r_net.weight": [HD, d],
            p + "dec_attn.o_net.weight": [d, HD], p + "dec_attn.layer_norm.weight": [d],
            p + "dec_attn.layer_norm.bias": [d], p + "pos_ff.CoreNet.0.weight": [di, d],
            p + "pos_ff.CoreNet.0.bias": [di], p + "pos_ff.CoreNet.3.weight": [d, di],
            p + "pos_ff.CoreNet.3.bias": [d], p + "pos_ff.layer_norm.weight": [d],
            p + "pos_ff.layer_norm.bias": [d]})
    for name in sorted(sd):
        if name in expected:
            continue
        for prefix, what in UNSUPPORTED_TENSORS:
            if name.startswith(prefix):
                fail(f"tensor '{name}' belongs to {what}, which rmt does not implement")
        fail(f"unexpected tensor '{name}' (not part of the MemTransformerLM rmt implements)")
    for name, shape in expected.items():
        if name not in sd:
            fail(f"the checkpoint has no tensor '{name}'")
        t = sd[name]
        if not t.is_floating_point():
            fail(f"tensor '{name}' has dtype {t.dtype}, expected a floating-point type")
        if list(t.shape) != shape:
            fail(f"tensor '{name}' has shape {list(t.shape)}, expected {shape} "
                 f"(n_token {V}, d_model {d}, n_head {H}, d_head {D}, d_inner {di})")
        if not bool(torch.isfinite(t.detach().to(torch.float32)).all()):
            fail(f"tensor '{name}' holds NaN or Inf values")
    if not torch.equal(sd["crit.out_layers.0.weight"].detach().float(),
                       sd["word_emb.emb_layers.0.weight"].detach().float()):
        fail("the output layer 'crit.out_layers.0.weight' differs from the embedding "
             "'word_emb.emb_layers.0.weight' (trained with --not_tied?); rmt ties them")
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0.0, d, 2.0, dtype=torch.float64) / d))
    if not torch.allclose(sd["pos_emb.inv_freq"].detach().double(), inv_freq, rtol=1e-5, atol=0):
        fail("tensor 'pos_emb.inv_freq' is not the standard sinusoid 1/10000^(2i/d_model)")
    return {"n_token": V, "n_layer": L, "n_head": H, "d_head": D, "d_model": d, "d_inner": di,
            "num_mem_tokens": m}


def check_model_sizes(model, sizes):
    for name in ("n_token", "n_layer", "n_head", "d_head", "d_model"):
        v = attr(model, name)
        if v is not MISSING and v is not None and v != sizes[name]:
            fail(f"the model's {name} is {v} but its tensors say {sizes[name]}")


# --------------------------------------------------------------------------------------------
# writing


def write_safetensors_atomic(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": {k: str(v) for k, v in metadata.items()}}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        data = np.ascontiguousarray(t.detach().cpu().to(torch.float32).numpy()).astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(head)))
            f.write(head)
            for b in blobs:
                f.write(b)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # atomic: never a half-written checkpoint
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fail(f"{path}: cannot write ({e.strerror or e})")


# --------------------------------------------------------------------------------------------


def parse_bool(s):
    v = s.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got '{s}'")


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="the authors' checkpoint (.pt): a pickled MemTransformerLM or a state_dict")
    p.add_argument("output", help="rmt checkpoint to write (.safetensors)")
    p.add_argument("--mem-len", type=int, help="Transformer-XL cache length (needed for a state_dict)")
    p.add_argument("--mem-at-end", type=parse_bool, metavar="true|false",
                   help="memory written at the segment's end (needed for a state_dict with memory tokens)")
    p.add_argument("--read-mem-from-cache", type=parse_bool, metavar="true|false",
                   help="memory tokens attend to the cache (needed for a state_dict with memory "
                        "tokens and mem_len > 0)")
    p.add_argument("--kind", choices=["baseline", "xl", "rmt", "mt", "xl_rmt"],
                   help="check that the checkpoint is this kind (it follows from the settings)")
    p.add_argument("--dropout", type=float,
                   help="dropout recorded for further training (default: the model's; 0.0 for a state_dict)")
    return p.parse_args(argv)


def convert(args):
    # A value out of range is an error like any other (one line, exit 1); argparse's exit 2 with
    # the usage is for options it cannot parse at all.
    if args.dropout is not None and not 0.0 <= args.dropout < 1.0:
        fail(f"--dropout must be in [0, 1), got {args.dropout}")
    if os.path.abspath(args.output) == os.path.abspath(args.input):
        fail(f"{args.output}: the output would overwrite the input")
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        fail(f"{args.output}: the directory {out_dir} does not exist")
    obj = load_file(args.input)
    sd, model, what = find_model(obj, args.input)
    try:
        sizes = config_from_tensors(sd)
        check_model_sizes(model, sizes)
        if model is not None:
            check_unsupported(model, sizes["n_layer"])
        s, src = settings(model, sizes["num_mem_tokens"], args)
    except ConvertError as e:
        fail(f"{args.input}: {e}")
    dropout = args.dropout if args.dropout is not None else as_float(attr(model, "drop")) if model is not None else 0.0
    dropatt = as_float(attr(submodule(model, "layers", "0", "dec_attn"), "dropatt")) if model is not None else 0.0
    config = {"format": "rmt-checkpoint-1", "kind": s["kind"], **{k: sizes[k] for k in (
        "n_token", "n_layer", "n_head", "d_head", "d_model", "d_inner")},
        "mem_len": s["mem_len"], "num_mem_tokens": sizes["num_mem_tokens"],
        "read_mem_from_cache": fmt(s["read_mem_from_cache"]), "dropout": repr(float(dropout)),
        "dropatt": repr(float(dropatt))}
    write_safetensors_atomic(args.output, {k: v for k, v in sd.items()}, config)
    given = ", ".join(f"{k} {fmt(s[k])} (from the {v})" for k, v in src.items() if v != "unused")
    print(f"wrote {args.output}: {config['kind']} from {what}, {config['n_layer']} layers, d_model "
          f"{config['d_model']}, {config['num_mem_tokens']} memory tokens; {given}")
    if model is None:
        sys.stderr.write(f"{PROG}: note: a state_dict does not record pre_lnorm, same_length, "
                         "clamp_len, ext_len: assumed the authors' defaults (off, off, -1, 0), the "
                         "only values rmt implements; convert the pickled model to have them checked\n")
    return config


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        convert(args)
    except ConvertError as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
