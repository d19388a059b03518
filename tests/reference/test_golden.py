#!/usr/bin/python3
"""Golden comparison of `rmt step-dump` against the PyTorch reference.

    /usr/bin/python3 tests/reference/test_golden.py --rmt PATH_TO_RMT
    /usr/bin/python3 tests/reference/test_golden.py --rmt PATH --device cpu-guarded --skip-self-test
    /usr/bin/python3 tests/reference/test_golden.py --self-test     # reference only

Without --self-test, the reference's self-test runs first, then the golden
cases. Prints one line per case with its worst ratio, then `N passed, M failed`.
Exit status non-zero on any failure.
"""
# The self-test is in golden_self_test.py, the cases and their checks in golden_cases.py.
import argparse
import math
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_cases import CASES, LM_CASES, run_case, run_lm_case  # noqa: E402
from golden_self_test import self_test  # noqa: E402

# tiny tensors: more threads only add overhead, and beside other jobs (a compile, ctest -j) they
# wait for each other (measured: the self-test 32 s with 2 threads beside a compile, 7 s with 1)
torch.set_num_threads(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rmt", help="path to the rmt binary")
    ap.add_argument("--self-test", action="store_true", help="only test the reference itself")
    ap.add_argument("--skip-self-test", action="store_true")
    ap.add_argument("--only", default="", help="run only cases whose name contains this")
    ap.add_argument("--keep", action="store_true", help="keep the temp dirs")
    ap.add_argument("--device", help="run `rmt step-dump --device DEVICE` (e.g. cpu-guarded, "
                    "whose buffers the host cannot touch outside a kernel)")
    args = ap.parse_args()

    passed = failed = 0
    if not args.skip_self_test:
        try:
            ok = self_test()
        except Exception:
            traceback.print_exc()
            ok = False
        passed, failed = (passed + 1, failed) if ok else (passed, failed + 1)
        print(f"{'PASS' if ok else 'FAIL'} reference_self_test", flush=True)
    if args.self_test:
        print(f"{passed} passed, {failed} failed")
        return 0 if failed == 0 else 1
    if not args.rmt:
        print("FAIL --rmt PATH is required for the golden cases")
        print(f"{passed} passed, {failed + 1} failed")
        return 1
    rmt = os.path.abspath(args.rmt)
    for i, c in enumerate(CASES):
        if args.only and args.only not in c["name"]:
            continue
        try:
            ok, worst, msg = run_case(c, rmt, c["seed"] or 100 + i, args.keep, args.device)
        except Exception:
            ok, worst, msg = False, math.inf, traceback.format_exc()
        print(f"{'PASS' if ok else 'FAIL'} {c['name']}: {msg}", flush=True)
        passed, failed = (passed + 1, failed) if ok else (passed, failed + 1)
    for i, c in enumerate(LM_CASES):
        if args.only and args.only not in c["name"]:
            continue
        try:
            ok, worst, msg = run_lm_case(c, rmt, 300 + i, args.keep, args.device)
        except Exception:
            ok, worst, msg = False, math.inf, traceback.format_exc()
        print(f"{'PASS' if ok else 'FAIL'} {c['name']}: {msg}", flush=True)
        passed, failed = (passed + 1, failed) if ok else (passed, failed + 1)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
