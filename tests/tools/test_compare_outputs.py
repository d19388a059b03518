#!/usr/bin/env python3
"""tools/compare_outputs.py (make check-build-flags) finds every difference that matters and no
other: the same outputs pass; what records the build or the clock is ignored; one flipped bit of
a tensor, a changed metric, a changed CSV cell and a file in one tree only each fail, named.
Standard library only. Usage: test_compare_outputs.py SOURCE_DIR"""
import json
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

tool = Path(sys.argv[1]) / "tools" / "compare_outputs.py"


def safetensors(path, values, metadata):
    data = struct.pack(f"<{len(values)}f", *values)
    header = {"__metadata__": metadata, "w": {"dtype": "F32", "shape": [len(values)], "data_offsets": [0, len(data)]}}
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


def tree(root, wall):
    (root / "run").mkdir(parents=True)
    safetensors(root / "run" / "last.safetensors", [0.5, -1.25, 3.0], {"step": "60", "wall_time_s": wall})
    (root / "run" / "results.json").write_text(json.dumps({"loss": 2.5, "wall_time_s": float(wall), "cpu_model": wall}))
    (root / "run" / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 2.0, "tokens_per_s": float(wall)}) + "\n")
    (root / "results.csv").write_text(f"run_id,loss,wall_time_s,build\nr1,2.5,{wall},g++ {wall}\n")
    (root / "run" / "train.log").write_text(f"step 1 | {wall} tok/s\n")
    (root / "data.npy").write_bytes(b"\x93NUMPY" + bytes(range(10)))


def compare(a, b):
    r = subprocess.run([sys.executable, str(tool), str(a), str(b)], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


failures = []


def expect(what, rc, out, want_rc, want_text):
    if rc != want_rc or want_text not in out:
        failures.append(f"{what}: exit {rc} (want {want_rc}), output lacks {want_text!r}:\n{out}")


with tempfile.TemporaryDirectory() as tmp:
    a, b = Path(tmp) / "a", Path(tmp) / "b"
    tree(a, "1.5")
    tree(b, "9.25")  # only the build, the clock and the logs differ
    expect("same outputs", *compare(a, b), 0, "all 5 files identical")

    c = Path(tmp) / "c"
    shutil.copytree(b, c)
    raw = bytearray((c / "run" / "last.safetensors").read_bytes())
    raw[-1] ^= 1  # the lowest exponent bit of the last float: 3.0 becomes 12.0
    (c / "run" / "last.safetensors").write_bytes(bytes(raw))
    expect("a flipped bit", *compare(a, c), 1, "run/last.safetensors: tensor w differs (largest difference 9)")

    d = Path(tmp) / "d"
    shutil.copytree(b, d)
    (d / "run" / "results.json").write_text(json.dumps({"loss": 2.5000001, "wall_time_s": 1.0, "cpu_model": "x"}))
    expect("a changed metric", *compare(a, d), 1, "run/results.json: bytes differ")

    e = Path(tmp) / "e"
    shutil.copytree(b, e)
    (e / "results.csv").write_text("run_id,loss,wall_time_s,build\nr1,2.4,1,x\n")
    expect("a changed CSV cell", *compare(a, e), 1, "results.csv")

    f = Path(tmp) / "f"
    shutil.copytree(b, f)
    (f / "run" / "extra.npy").write_bytes(b"x")
    expect("a file in one tree only", *compare(a, f), 1, f"only in {f}: run/extra.npy")

for line in failures:
    print("FAIL " + line)
print(f"{5 - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
