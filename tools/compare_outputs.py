#!/usr/bin/env python3
"""Compare two trees of rmt outputs file for file (tools/check_build_flags.sh).

Every file must exist in both and hold the same bytes, except what records the build, the
machine or the clock: in JSON, JSON-lines and CSV files and in checkpoints' metadata those keys
are dropped before comparing (everything else in them must be equal), and progress logs (*.log)
are not compared. A differing checkpoint names its first differing tensor and the largest
difference. Exit 0 when all match, 1 otherwise.
Usage: compare_outputs.py DIR_A DIR_B
"""
import array
import csv
import io
import json
import struct
import sys
from pathlib import Path

# Keys that describe the build, the machine or the clock, not what was computed.
VOLATILE = {"build_flags", "build_type", "compiler", "cpu_model", "gemm", "git_commit", "native_build",
            "peak_rss_mb", "rmt_version", "vector_extensions", "wall_time_s", "tokens_per_s",
            "elapsed_s", "cuda", "build"}
# Progress logs (*.log) carry speeds and times; the losses they show are in metrics.jsonl.
SKIP_SUFFIXES = {".log"}


def strip(value):
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def split_safetensors(path):
    """(header without __metadata__, metadata without VOLATILE, tensor bytes)."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    metadata = strip(header.pop("__metadata__", {}))
    return header, metadata, raw[8 + n:]


def safetensors(path):
    """The tensors of a .safetensors file by name, as arrays of their element type."""
    header, _, data = split_safetensors(path)
    codes = {"F32": "f", "F64": "d", "I64": "q", "I32": "i", "U8": "B"}
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = array.array(codes.get(t["dtype"], "B"), data[b:e])
    return out


def explain(a, b):
    """Why two files with different bytes differ, in one line."""
    if a.suffix != ".safetensors":
        return "bytes differ"
    ta, tb = safetensors(a), safetensors(b)
    if ta.keys() != tb.keys():
        return f"tensor names differ: {sorted(ta.keys() ^ tb.keys())[:5]}"
    for name in ta:
        x, y = ta[name], tb[name]
        if x != y:
            if len(x) != len(y):
                return f"tensor {name}: {len(x)} elements against {len(y)}"
            diff = max(abs(float(p) - float(q)) for p, q in zip(x, y))
            return f"tensor {name} differs (largest difference {diff:.3g})"
    return "metadata differs"


def same(a, b):
    if a.suffix == ".json":
        return strip(json.loads(a.read_text())) == strip(json.loads(b.read_text()))
    if a.suffix == ".jsonl":
        la, lb = a.read_text().splitlines(), b.read_text().splitlines()
        return len(la) == len(lb) and all(strip(json.loads(x)) == strip(json.loads(y)) for x, y in zip(la, lb))
    if a.suffix == ".csv":  # results.csv: the columns that describe the build and the clock dropped
        rows = [list(csv.DictReader(io.StringIO(p.read_text()))) for p in (a, b)]
        return [strip(r) for r in rows[0]] == [strip(r) for r in rows[1]] and len(rows[0]) > 0
    if a.suffix == ".safetensors":  # the training state records its wall time
        return split_safetensors(a) == split_safetensors(b)
    return a.read_bytes() == b.read_bytes()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ra, rb = Path(sys.argv[1]), Path(sys.argv[2])
    files_a = {p.relative_to(ra) for p in ra.rglob("*") if p.is_file() and p.suffix not in SKIP_SUFFIXES}
    files_b = {p.relative_to(rb) for p in rb.rglob("*") if p.is_file() and p.suffix not in SKIP_SUFFIXES}
    bad = [f"only in {ra}: {p}" for p in sorted(files_a - files_b)]
    bad += [f"only in {rb}: {p}" for p in sorted(files_b - files_a)]
    kinds = {}
    for rel in sorted(files_a & files_b):
        kinds[rel.suffix or rel.name] = kinds.get(rel.suffix or rel.name, 0) + 1
        if not same(ra / rel, rb / rel):
            bad.append(f"{rel}: {explain(ra / rel, rb / rel)}")
    counted = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    if bad:
        print(f"compare_outputs: {len(bad)} of {len(files_a | files_b)} files differ:")
        for line in bad:
            print("  " + line)
        sys.exit(1)
    print(f"compare_outputs: all {len(files_a)} files identical ({counted})")


if __name__ == "__main__":
    main()
