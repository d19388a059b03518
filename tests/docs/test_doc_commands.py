#!/usr/bin/env python3
"""The commands that README.md and docs/*.md show, checked against the rmt that is built.

Usage: test_doc_commands.py RMT REPO_ROOT

1. Every `rmt ...` line in a fenced code block names a subcommand that exists, and every --option
   on it is one that subcommand's --help lists (docs drift as options are renamed).
2. The example sessions (lines that start with `$ rmt`) of the files in RUN_FILES are run in
   order, in an empty directory, as a reader would type them (after the python blocks that make
   their input, and with the yaml blocks whose first line names a file, `# NAME.yaml`, written): each must succeed, unless the doc
   shows it failing (`rmt: error: ...` below it), in which case it must fail with that message.
3. A time the docs give for `make reproduce` is the report's total (check_reproduce_time).
4. README's first session runs this rmt where Debian's is on the PATH (check_first_session_path).
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

# The sessions that are cheap enough to run (seconds: small datasets, one 2500-step training).
RUN_FILES = ["README.md", "docs/datasets.md", "docs/training.md"]
NESTED = {"data"}  # subcommands with subcommands of their own: rmt data check|show|import


def code_blocks(path, with_language=False):
    """The fenced code blocks of a markdown file, as lists of lines (with their language: python ...)."""
    blocks, block, language = [], None, ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("```"):
                if block is None:
                    block, language = [], line[3:].strip()
                else:
                    blocks.append((language, block) if with_language else block)
                    block = None
            elif block is not None:
                block.append(line)
    return blocks


def commands(block):
    """(command, session, expected_error) for each rmt line of a block; continuation lines joined."""
    out, i = [], 0
    shows_session = any(l.strip().startswith("$ ") for l in block)  # then other lines are output
    while i < len(block):
        line = block[i].strip()
        session = line.startswith("$ ")
        if session:
            line = line[2:]
        elif shows_session:
            i += 1
            continue
        if not line.startswith("rmt ") and line != "rmt":
            i += 1
            continue
        while line.endswith("\\") and i + 1 < len(block):
            i += 1
            line = line[:-1] + " " + block[i].strip()
        line = re.sub(r"\s+#.*$", "", line)  # a trailing comment
        expected = None
        j = i + 1
        while session and j < len(block) and not block[j].startswith("$ "):
            if block[j].startswith("rmt: error:"):
                expected = block[j]
                break
            j += 1
        out.append((line, session, expected))
        i += 1
    return out


def help_text(rmt, path, cache={}):
    key = tuple(path)
    if key not in cache:
        r = subprocess.run([rmt, *path, "--help"], capture_output=True, text=True)
        cache[key] = (r.returncode, r.stdout + r.stderr)
    return cache[key]


def check_options(rmt, source, line, failures):
    tokens = line.split()
    path = tokens[1:2]
    if tokens[1:2] and tokens[1] in NESTED and len(tokens) > 2 and not tokens[2].startswith("-"):
        path = tokens[1:3]
    if not path or path[0].startswith("-"):
        path = []
    status, text = help_text(rmt, path)
    if status != 0:
        failures.append(f"{source}: `{line}`: `rmt {' '.join(path)} --help` fails: {text.strip()[:200]}")
        return
    for token in tokens:
        token = token.strip("[]()|,`")
        if not token.startswith("--") or token == "--":
            continue
        flag = token.split("=")[0].split("|")[0]
        if not re.search(r"(^|[\s,\[])" + re.escape(flag) + r"([\s=,\]]|$)", text):
            failures.append(f"{source}: `{line}`: {flag} is not an option of `rmt {' '.join(path)}`")


def has_placeholder(line):
    # FILE, RUN_DIR, N, ...: a synopsis, not a command to type
    return any(re.fullmatch(r"[A-Z][A-Z_0-9.]*", t.strip("[]()|,")) for t in line.split()[1:]) or "..." in line


def run_session(rmt, repo, source, failures):
    """The file's sessions in order: `$ rmt` lines, and the python blocks that make their input."""
    with tempfile.TemporaryDirectory(prefix="rmt_doc_") as cwd:
        os.symlink(os.path.join(repo, "experiments"), os.path.join(cwd, "experiments"))
        for language, block in code_blocks(os.path.join(repo, source), with_language=True):
            if language == "yaml" and block and re.fullmatch(r"# [\w.-]+\.yaml", block[0].strip()):
                # A file the session uses, named on its first line (`# sort_sweep.yaml`): written as shown.
                with open(os.path.join(cwd, block[0].strip()[2:]), "w", encoding="utf-8") as f:
                    f.write("\n".join(block[1:]) + "\n")
                continue
            if language == "python":
                # Debian's python3, which `make deps` gives numpy (a python3 earlier on PATH may lack it)
                python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
                r = subprocess.run([python, "-c", "\n".join(block)], cwd=cwd, capture_output=True, text=True)
                if r.returncode != 0:
                    failures.append(f"{source}: its python block failed: {r.stderr.strip()[-300:]}")
                continue
            run_commands(rmt, source, cwd, commands(block), failures)


def run_commands(rmt, source, cwd, cmds, failures):
    for line, session, expected in cmds:
        if not session or has_placeholder(line):
            continue
        args = shlex.split(line)
        r = subprocess.run([rmt, *args[1:]], cwd=cwd, capture_output=True, text=True,
                           env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")})
        if expected is None and r.returncode != 0:
            failures.append(f"{source}: `{line}` failed ({r.returncode}): {r.stderr.strip()[:300]}")
        elif expected is not None:
            first = next((l for l in r.stderr.splitlines() if l.startswith("rmt: error:")), "")
            if r.returncode == 0 or first != expected:
                failures.append(f"{source}: `{line}`: the doc shows\n    {expected}\n  but rmt says "
                                f"(exit {r.returncode})\n    {first or r.stderr.strip()[:300]}")
        print(f"ran {source}: {line} -> exit {r.returncode}")


def check_reproduce_time(repo, failures):
    """3. Where README.md, docs/reproduction.md or the Makefile say how long `make reproduce` takes,
    the number is the report's own total (REPORT.md's first lines), in minutes: a typed time drifts."""
    with open(os.path.join(repo, "experiments/results/REPORT.md"), encoding="utf-8") as f:
        m = re.search(r"Total wall time of the items: (\d+) min", f.read())
    if not m:
        failures.append("experiments/results/REPORT.md: no 'Total wall time of the items: N min' line")
        return
    total = f"{m.group(1)} min"
    for source in ["README.md", "docs/reproduction.md", "Makefile"]:
        with open(os.path.join(repo, source), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if "make reproduce" in line.lower() or line.startswith("# item (rmt reproduce --list"):
                    if re.search(r"\d+(\.\d+)? ?h\b|\bhours?\b|\d+ min", line) and total not in line:
                        failures.append(f"{source}:{n}: a time for make reproduce that is not REPORT.md's total "
                                        f"({total}): {line.strip()}")


def check_first_session_path(repo, failures):
    """4. README's first session names the binary the way that works on Debian, where `rmt` on the
    PATH is tar's remote tape server: its lines up to the first rmt command run in bash as typed,
    from a copy of the checkout's layout (build/ linked), with a stand-in of Debian's rmt first on
    the PATH; that command must run this rmt."""
    with open(os.path.join(repo, "README.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.find("A first session")
    blocks = code_blocks(os.path.join(repo, "README.md"))
    block = next((b for b in blocks if b and text.find("\n".join(b), start) > start), None)
    if start < 0 or block is None:
        failures.append("README.md: no first session (a code block after 'A first session')")
        return
    typed = []
    for line in block:
        typed.append(line)
        if line.strip().startswith("rmt "):
            break
    with tempfile.TemporaryDirectory() as tmp:
        debian = os.path.join(tmp, "sbin")
        os.mkdir(debian)
        with open(os.path.join(debian, "rmt"), "w") as f:  # what /usr/sbin/rmt prints for these words
            f.write("#!/bin/sh\necho 'rmt: too many arguments' >&2\nexit 1\n")
        os.chmod(os.path.join(debian, "rmt"), 0o755)
        checkout = os.path.join(tmp, "checkout")
        os.mkdir(checkout)
        os.symlink(os.path.join(repo, "build"), os.path.join(checkout, "build"))
        os.symlink(os.path.join(repo, "experiments"), os.path.join(checkout, "experiments"))
        script = "set -e\n" + "\n".join(re.sub(r"\s+#.*$", "", l) for l in typed) + "\n"
        r = subprocess.run(["bash", "-c", script], cwd=checkout, capture_output=True, text=True,
                           env={**os.environ, "PATH": debian + ":" + os.environ["PATH"]})
        if r.returncode != 0:
            failures.append(f"README.md's first session, with Debian's rmt on the PATH: {typed[-1].strip()} "
                            f"-> exit {r.returncode}: {(r.stderr or r.stdout).strip()[:300]}")


def main():
    rmt, repo = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    sources = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(repo, "docs")) if f.endswith(".md"))
    failures, checked = [], 0
    for source in sources:
        cmds = [c for block in code_blocks(os.path.join(repo, source)) for c in commands(block)]
        for line, _, _ in cmds:
            check_options(rmt, source, line, failures)
            checked += 1
        if source in RUN_FILES:
            run_session(rmt, repo, source, failures)
    check_reproduce_time(repo, failures)
    check_first_session_path(repo, failures)
    print(f"{checked} documented rmt commands checked against --help")
    if checked < 20:
        failures.append(f"only {checked} documented commands found: is the extraction broken?")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
