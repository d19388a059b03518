"""flash-linear-attention's own naive delta-rule functions, loaded by path (docs/deltanet.md §3).

fla-core's fla/ops/delta_rule/naive.py and fla/ops/gated_delta_rule/naive.py import only torch and
einops, but importing them as modules runs fla/ops/__init__.py, which needs triton. So each file is
loaded by its path: fla/__init__, fla.ops and triton are never imported. `make deps-python`
pip-installs the pinned fla-core and einops into tests/reference/.pydeps (ignored by git), which
comes first on sys.path here; else the interpreter's own are used. Missing: FlaMissing, whose
message says what to install (the tests fail, never skip).

Used by test_deltanet_reference.py (fla against deltanet_reference.py), by
delta_model_reference.py (fla's recurrences, or fla's chunked forms, as the delta rule of the
whole-model reference) and through it by bench/pytorch_reference.py (the chunked forms: the
PyTorch side of `rmt bench --model delta`).
"""
import functools
import importlib.util
import os
import re
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
PYDEPS = os.path.join(HERE, ".pydeps")  # where `make deps-python` installs fla-core and einops
FLA_PIN = "0.6.0"                        # the Makefile's FLA_CORE_VERSION (EINOPS_VERSION 0.8.2)
INSTALL = ("make deps-python  (it runs: /usr/bin/python3 -m pip install --no-deps --target "
           f"tests/reference/.pydeps fla-core=={FLA_PIN} einops==0.8.2; Debian's pip is "
           "python3-pip)")
FILES = {"delta": os.path.join("ops", "delta_rule", "naive.py"),
         "gated": os.path.join("ops", "gated_delta_rule", "naive.py")}


class FlaMissing(RuntimeError):
    """fla-core or einops cannot be found; the message says what to install."""

    def __init__(self, what):
        super().__init__(f"needs {what}.\nInstall with: {INSTALL}")


def _fla_version(pkg_dir):
    try:
        import importlib.metadata as md
        for dist in ("fla-core", "flash-linear-attention"):
            try:
                return md.version(dist), dist
            except md.PackageNotFoundError:
                pass
    except ImportError:
        pass
    m = re.search(r'__version__\s*=\s*"([^"]+)"', open(os.path.join(pkg_dir, "__init__.py")).read())
    return (m.group(1) if m else "unknown"), "fla/__init__.py"


@functools.lru_cache(maxsize=None)
def load():
    """The two naive modules: a namespace with .delta, .gated (the modules), .version, .source
    (where the version was read) and .pkg_dir. Raises FlaMissing."""
    if os.path.isdir(PYDEPS) and PYDEPS not in sys.path:
        sys.path.insert(0, PYDEPS)
    if importlib.util.find_spec("einops") is None:
        raise FlaMissing("einops (imported by fla's naive.py files), not found on sys.path or in "
                         "tests/reference/.pydeps")
    spec = importlib.util.find_spec("fla")    # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise FlaMissing("fla-core (flash-linear-attention's ops package, for its naive delta-rule "
                         "functions), not found on sys.path or in tests/reference/.pydeps")
    for pkg_dir in spec.submodule_search_locations:
        if all(os.path.isfile(os.path.join(pkg_dir, p)) for p in FILES.values()):
            break
    else:
        raise FlaMissing(f"fla-core with {' and '.join(FILES.values())}; the fla found "
                         f"({list(spec.submodule_search_locations)}) has not both")
    mods = {}
    for key, p in FILES.items():
        s = importlib.util.spec_from_file_location(f"rmt_fla_naive_{key}", os.path.join(pkg_dir, p))
        mods[key] = importlib.util.module_from_spec(s)
        s.loader.exec_module(mods[key])
    version, source = _fla_version(pkg_dir)
    return types.SimpleNamespace(delta=mods["delta"], gated=mods["gated"], version=version,
                                 source=source, pkg_dir=pkg_dir)


def recurrent_rule(q, k, v, beta, g=None, initial_state=None):
    """The delta rule by fla's naive recurrences, in deltanet_reference.delta_rule_recurrent's
    layouts (q, k [B, H, T, d_k], v [B, H, T, d_v], beta and g [B, H, T], S [B, H, d_k, d_v]) and
    scale 1/sqrt(d_k): delta_rule_recurrence for g None (DeltaNet), else
    naive_recurrent_gated_delta_rule (batch-major [B, T, H, D], beta before g). Both compute in
    float32; o and S_T come back in q's dtype. Differentiable (plain torch ops)."""
    fla = load()
    if g is None:
        o, S = fla.delta.delta_rule_recurrence(q, k, v, beta, initial_state=initial_state,
                                               output_final_state=True)
    else:
        def bt(x):
            return x.transpose(1, 2)
        o, S = fla.gated.naive_recurrent_gated_delta_rule(
            bt(q), bt(k), bt(v), bt(beta), bt(g), scale=None, initial_state=initial_state,
            output_final_state=True)
        o = bt(o)
    return o.to(q.dtype), S.to(q.dtype)


def chunk_size_for(T, largest=64):
    """The chunk size of chunk_rule for segments of T rows: the largest divisor of T that is at
    most `largest` (fla's default chunk 64), so that no chunk is padded (T 24 -> 24, 64 -> 64,
    256 -> 64, 6 -> 6)."""
    assert T >= 1 and largest >= 1, (T, largest)
    return max(c for c in range(1, min(T, largest) + 1) if T % c == 0)


def chunk_rule(q, k, v, beta, g=None, initial_state=None, chunk_size=64):
    """The delta rule by fla's naive chunked form, in recurrent_rule's layouts, scale and result
    (o, S_T): naive_chunk_gated_delta_rule (fla/ops/gated_delta_rule/naive.py; batch-major
    [B, T, H, D], g before beta), which takes the carried state (initial_state) and returns the
    final one. DeltaNet (g None) runs it with g = 0 (every decay exp(0) = 1, the in-chunk decay
    matrix tril(ones)): fla's delta_rule_chunkwise (fla/ops/delta_rule/naive.py) is the same
    chunked form but has no initial state, so it cannot carry S from segment to segment;
    test_bench_reference.py checks that the two agree from a zero state. The function pads T to
    a multiple of chunk_size itself (zero rows: beta 0, g 0, which leave S unchanged); choose a
    chunk_size that divides T (chunk_size_for) to avoid padded work. Computes in float32; o and
    S_T come back in q's dtype. Differentiable (plain torch ops)."""
    fla = load()

    def bt(x):
        return x.transpose(1, 2)
    if g is None:
        g = beta.new_zeros(beta.shape)
    o, S = fla.gated.naive_chunk_gated_delta_rule(
        bt(q), bt(k), bt(v), bt(g), bt(beta), chunk_size=chunk_size, scale=None,
        initial_state=initial_state, output_final_state=True)
    return bt(o).to(q.dtype), S.to(q.dtype)


def chunkwise_rule_zero_state(q, k, v, beta, chunk_size=32):
    """fla's DeltaNet chunked form itself (delta_rule_chunkwise, from a zero state; T a multiple of
    chunk_size), in recurrent_rule's layouts: (o, S_T). Only to check chunk_rule's g = 0 path."""
    return load().delta.delta_rule_chunkwise(q, k, v, beta, chunk_size=chunk_size)
