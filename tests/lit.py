#!/usr/bin/env python3
"""Runs the `// RUN:` lines of one text test, as LLVM's lit does, with no lit installed.

Substitutions: %s the test file, %t a scratch path unique to the test, %S the test's folder.
`vlmc`, `FileCheck` and `not` resolve to the build's binaries (PATH is set up so that the
lines read exactly like the commands a user types). Each RUN line runs under
`bash -o pipefail`; the test fails on the first line that exits non-zero.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile


def run_lines(path):
    lines, pending = [], ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            text = raw.strip()
            marker = "RUN:"
            if not (text.startswith("//") or text.startswith("#")) or marker not in text:
                continue
            body = text.split(marker, 1)[1].strip()
            if body.endswith("\\"):
                pending += body[:-1] + " "
                continue
            lines.append(pending + body)
            pending = ""
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vlmc", required=True)
    parser.add_argument("--filecheck", required=True)
    parser.add_argument("test")
    args = parser.parse_args()

    commands = run_lines(args.test)
    if not commands:
        print(f"{args.test}: no RUN lines", file=sys.stderr)
        return 1
    bindir = tempfile.mkdtemp(prefix="vlmc-lit-bin-")
    scratch = tempfile.mkdtemp(prefix="vlmc-lit-")
    try:
        for name, target in (("vlmc", args.vlmc), ("FileCheck", args.filecheck)):
            os.symlink(os.path.abspath(target), os.path.join(bindir, name))
        llvm_bin = os.path.dirname(os.path.abspath(args.filecheck))
        env = dict(os.environ, PATH=f"{bindir}:{llvm_bin}:{os.environ.get('PATH', '')}")
        test = os.path.abspath(args.test)
        for i, command in enumerate(commands):
            expanded = (command.replace("%s", test)
                        .replace("%t", os.path.join(scratch, "t"))
                        .replace("%S", os.path.dirname(test)))
            print(f"RUN[{i}]: {expanded}", flush=True)
            result = subprocess.run(["bash", "-o", "pipefail", "-c", expanded], env=env)
            if result.returncode != 0:
                print(f"{args.test}: RUN line {i} failed with exit code {result.returncode}",
                      file=sys.stderr)
                return 1
        return 0
    finally:
        shutil.rmtree(bindir, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
