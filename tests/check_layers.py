#!/usr/bin/env python3
"""The layers, enforced: every `#include "folder/..."` of the project's C sources must go down
the layer graph (docs/design.md), and a backend's or a target's folder is private to it.

    tests/check_layers.py [ROOT]        checks the tree; exit 1 listing each wrong include
    tests/check_layers.py --self-test   plants wrong includes in a scratch tree and checks
                                        that each one is caught (and a clean tree passes)

A file's layer is its top folder (support/, ir/, ...); runtime/backends/NAME/ and
codegen/targets/NAME/ are layers of their own, above runtime/ and codegen/, and nothing
outside such a folder includes its headers: the rest reaches a backend or a target through
its registry only. tools/, tests/ and bench/ sit on top (but must respect the private
folders too)."""
import os
import re
import shutil
import sys
import tempfile

# layer -> the layers it may include (besides itself). Keep in step with docs/design.md.
BELOW = {
    "support": set(),
    "ir": {"support"},
    "frontend": {"support", "ir"},
    "reference": {"support", "ir"},
    "artifact": {"support", "ir", "frontend"},
    "passes": {"support", "ir", "reference"},
    "models": {"support", "ir", "frontend", "reference", "passes"},
    "codegen": {"support", "ir", "frontend", "reference", "passes", "models", "artifact"},
    "runtime": {"support", "ir", "frontend", "reference", "artifact"},
}
BELOW["codegen/target"] = BELOW["codegen"] | {"codegen"}
BELOW["runtime/backend"] = BELOW["runtime"] | {"runtime"}
TOP = {"tools", "tests", "bench"}  # may include any layer's public headers
PRIVATE = (("runtime", "backends"), ("codegen", "targets"))
# Private headers that tests/ alone may include: self-contained parts of a backend or target (nothing
# but support/ below them) that their unit test and fuzzer feed hostile bytes directly, one
# call at a time, where the registry would reach them only through a whole backend.
TESTED_PRIVATE = {"runtime/backends/cpu/elf_loader.h", "runtime/backends/vulkan/spirv_check.h",
                  "runtime/backends/vulkan/kernels.h", "codegen/targets/cpu/lower.h",
                  "codegen/targets/cpu/machine.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    """(layer, private folder or None) of a path relative to the root."""
    parts = path.split("/")
    for top, sub in PRIVATE:
        if len(parts) >= 4 and parts[0] == top and parts[1] == sub:
            kind = "runtime/backend" if top == "runtime" else "codegen/target"
            return kind, "/".join(parts[:3])
    return parts[0], None


def sources(root):
    for top in sorted(set(BELOW) | TOP):
        base = os.path.join(root, top.split("/")[0])
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("build"))
            for f in sorted(filenames):
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(dirpath, f), root)


def violations(root):
    out = []
    for path in sorted(set(sources(root))):
        layer, private = folder_of(path)
        if layer not in BELOW and layer not in TOP:
            continue
        text = open(os.path.join(root, path), errors="replace").read()
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            inc_layer, inc_private = folder_of(inc)
            if inc_layer not in BELOW and inc_layer not in TOP:
                continue  # a system-style or local header
            where = "%s:%d: #include \"%s\"" % (path, line, inc)
            if inc_private and inc_private != private:
                if layer == "tests" and inc in TESTED_PRIVATE:
                    continue
                out.append("%s: %s is private to its folder (reach it through the registry)"
                           % (where, inc_private))
            elif layer in TOP or inc_layer == layer:
                continue
            elif inc_layer not in BELOW[layer]:
                out.append("%s: %s may not include %s (it may include: %s)" %
                           (where, private or layer, inc_layer,
                            ", ".join(sorted(BELOW[layer])) or "nothing"))
    return out


def self_test(root):
    """Plants each kind of wrong include in a scratch copy of the sources."""
    plants = [
        ("ir/zz_planted.c", '#include "runtime/session.h"\n', "ir may not include runtime"),
        ("codegen/zz_planted.c", '#include "runtime/params.h"\n', "codegen may not include runtime"),
        ("runtime/zz_planted.c", '#include "codegen/compile.h"\n', "runtime may not include codegen"),
        ("tools/zz_planted.c", '#include "runtime/backends/cpu/cpu_backend.h"\n',
         "is private to its folder"),
        ("tools/zz_planted.c", '#include "runtime/backends/cpu/elf_loader.h"\n',
         "is private to its folder"),
        ("tests/zz_planted.c", '#include "runtime/backends/cpu/cpu_backend.h"\n',
         "is private to its folder"),
    ]
    scratch = tempfile.mkdtemp()
    try:
        for top in sorted({t.split("/")[0] for t in BELOW} | TOP):
            src = os.path.join(root, top)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(scratch, top),
                                ignore=shutil.ignore_patterns("build*", "fixtures", "*.safetensors"))
        before = set(violations(scratch))  # the tree's own (the other test reports those)
        for path, line, expect in plants:
            full = os.path.join(scratch, path)
            with open(full, "w") as f:
                f.write(line)
            found = sorted(set(violations(scratch)) - before)
            os.remove(full)
            if not any(path in v and expect in v for v in found):
                print("self-test: a planted %s in %s was not caught" % (line.strip(), path))
                return 1
            print("self-test: caught %s" % found[0])
        if set(violations(scratch)) != before:
            print("self-test: removing the planted files did not restore the tree's result")
            return 1
        print("self-test: %d planted wrong includes caught" % len(plants))
        return 0
    finally:
        shutil.rmtree(scratch)


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        root = argv[2] if len(argv) > 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return self_test(root)
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = violations(root)
    for v in found:
        print(v)
    n = sum(1 for _ in sources(root))
    print("layers: %d files, %d wrong includes" % (n, len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
