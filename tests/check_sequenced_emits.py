#!/usr/bin/env python3
"""Kernel text must not depend on the C compiler that built vlmc.

The targets write each kernel as MLIR text through the shared emitter (codegen/kernel_emit.c):
every helper that takes the emitter appends lines and numbers SSA values as it is called. C
leaves unspecified the order in which a call's arguments (or an initializer list's elements,
or a binary operator's operands) are evaluated: gcc goes right to left, clang left to right.
`f(e, g(e, ...), h(e, ...))` therefore writes g's and h's lines in a different order under
each compiler, and the kernels, their SPIR-V and the artifact's bytes differ with the
compiler (found by e2e.metal_golden under the clang build). This check finds every such
place so that each emitting step is its own statement.

    tests/check_sequenced_emits.py [ROOT]       checks codegen/; exit 1 listing each place
    tests/check_sequenced_emits.py --self-test  plants unsequenced emits in a scratch tree
                                                and checks each one is caught

A function "emits" if it is one of the emitter's primitives below or (transitively) calls a
function that emits, over every function defined under codegen/. A place is reported when two
or more of its operands each contain a call to an emitting function."""
import os
import re
import shutil
import sys
import tempfile

MEMBER = "(a call through a struct member)"
# What changes the text or the SSA numbering: the rest of the emitter is built on these.
PRIMITIVES = {"vlmc_kernel_emit_line", "vlmc_kernel_emit_entry_line", "vlmc_kernel_emit_fresh",
              "vlmc_kernel_emit_memo_add", "vlmc_kernel_emit_fail", MEMBER}
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined", "_Alignof",
            "_Static_assert", "do", "else"}
# Operators whose operands C leaves unsequenced (&&, ||, ?: and the comma operator are
# sequenced; assignment is handled as a statement, not an operand pair).
UNSEQUENCED_OPS = re.compile(r"(?<![-+*/%&|^<>=!])(\+|-|\*|/|%|<<|>>|<=|>=|<|>|==|!=|&|\||\^)"
                             r"(?![-+=&|>])")
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def callees(s, a, b):
    """The names called in s[a:b]; a call through a struct member (the targets' hooks, e.g.
    e->hooks->load_input(...)) is MEMBER: it may emit, as far as this check can tell."""
    for m in CALL.finditer(s, a, b):
        before = s[max(0, m.start() - 2):m.start()]
        if before.endswith("->") or before.endswith("."):
            yield MEMBER
        elif m.group(1) not in KEYWORDS:
            yield m.group(1)


def strip(src):
    """Comments and string/char literals blanked, lengths (and so line numbers) kept."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group())
    src = re.sub(r"/\*.*?\*/", blank, src, flags=re.S)
    src = re.sub(r"//[^\n]*", blank, src)
    src = re.sub(r'"(\\.|[^"\\\n])*"', lambda m: '"' + " " * (len(m.group()) - 2) + '"', src)
    src = re.sub(r"'(\\.|[^'\\\n])*'", lambda m: "'" + " " * (len(m.group()) - 2) + "'", src)
    src = re.sub(r"^[ \t]*#[^\n]*(\\\n[^\n]*)*", blank, src, flags=re.M)
    return src


def matching(s, i):
    """Index of the bracket closing the one at s[i]."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] in "([{":
            depth += 1
        elif s[j] in ")]}":
            depth -= 1
            if depth == 0:
                return j
    return len(s) - 1


def split_top(s, a, b, sep=","):
    """The top-level pieces of s[a:b] split at `sep`, as (start, end) pairs."""
    out, depth, start = [], 0, a
    for j in range(a, b):
        c = s[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            out.append((start, j))
            start = j + 1
    out.append((start, b))
    return out


def functions(s):
    """(name, body_start, body_end) of each function defined in stripped source s."""
    out = []
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", s):
        name = m.group(1)
        if name in KEYWORDS:
            continue
        # a definition: at file scope, ")" then "{"
        line_start = s.rfind("\n", 0, m.start()) + 1
        if s[line_start] in " \t":
            continue
        close = matching(s, m.end() - 1)
        rest = s[close + 1:]
        stripped = rest.lstrip()
        if not stripped.startswith("{"):
            continue
        body = close + 1 + (len(rest) - len(stripped))
        out.append((name, body, matching(s, body)))
    return out


def emitting_functions(sources):
    calls = {}
    for s in sources.values():
        for name, a, b in functions(s):
            calls.setdefault(name, set()).update(callees(s, a, b))
    emitting = set(PRIMITIVES)
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            if name not in emitting and called & emitting:
                emitting.add(name)
                changed = True
    return emitting


def emits(s, a, b, emitting):
    return any(name in emitting for name in callees(s, a, b))


def operands(s, a, b):
    """The operands of top-level unsequenced binary operators in s[a:b] (one piece if none)."""
    pieces, depth, start = [], 0, a
    j = a
    while j < b:
        c = s[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0:
            if s.startswith("&&", j) or s.startswith("||", j) or c in "?:=,":
                # a sequenced or assigning operator: the sides are checked separately
                pieces.append((start, j))
                start = j + (2 if s[j:j + 2] in ("&&", "||", "==", "!=", "<=", ">=") else 1)
                j = start
                continue
            m = UNSEQUENCED_OPS.match(s, j)
            if m and s[start:j].strip():
                pieces.append((start, j, "op"))
                start = m.end()
                j = start
                continue
        j += 1
    pieces.append((start, b))
    return pieces


def report_places(s, emitting):
    """(line, what) for each call, initializer or operator with 2+ emitting operands."""
    found = []
    for m in CALL.finditer(s):
        if m.group(1) in KEYWORDS:
            continue
        open_ = m.end() - 1
        close = matching(s, open_)
        args = split_top(s, open_ + 1, close)
        if sum(emits(s, x, y, emitting) for x, y in args) >= 2:
            found.append((s.count("\n", 0, m.start()) + 1, f"the arguments of {m.group(1)}()"))
    for m in re.finditer(r"[=,(]\s*\{", s):
        open_ = m.end() - 1
        close = matching(s, open_)
        elems = split_top(s, open_ + 1, close)
        if sum(emits(s, x, y, emitting) for x, y in elems) >= 2:
            found.append((s.count("\n", 0, open_) + 1, "an initializer list"))
    # binary operators: within each statement and each call argument
    spans = [(a, b) for m in re.finditer(r"[^;{}]+", s) for a, b in [(m.start(), m.end())]]
    for m in CALL.finditer(s):
        open_ = m.end() - 1
        spans.extend(split_top(s, open_ + 1, matching(s, open_)))
    seen = set()
    for a, b in spans:
        run = []
        for piece in operands(s, a, b):
            run.append(piece)
            if len(piece) == 2:  # a sequenced boundary ends the operator chain
                chain = [p for p in run]
                if len(chain) >= 2 and sum(emits(s, p[0], p[1], emitting) for p in chain) >= 2:
                    line = s.count("\n", 0, chain[0][0]) + 1
                    if (line, chain[0][0]) not in seen:
                        seen.add((line, chain[0][0]))
                        found.append((line, "the operands of a binary operator"))
                run = []
    return found


def check(root):
    paths = []
    for dirpath, _, names in os.walk(os.path.join(root, "codegen")):
        paths += [os.path.join(dirpath, n) for n in names if n.endswith(".c")]
    sources = {p: strip(open(p, encoding="utf-8").read()) for p in sorted(paths)}
    emitting = emitting_functions(sources)
    problems = []
    for path, s in sources.items():
        for line, what in sorted(set(report_places(s, emitting))):
            problems.append(f"{os.path.relpath(path, root)}:{line}: {what} both emit kernel text; "
                            "C leaves their order to the compiler: give each its own statement")
    return problems


CLEAN = """#include "x.h"
int vlmc_kernel_emit_fresh(vlmc_kernel_emit_t *e) { return e->next++; }
static int op(vlmc_kernel_emit_t *e, int a, int b) {
  int v = vlmc_kernel_emit_fresh(e);
  return v + a - b;
}
static int pure(int a, int b) { return a + b; }
int kernel(vlmc_kernel_emit_t *e) {
  int a = op(e, 1, 2);
  int b = op(e, a, pure(3, 4));
  int c = op(e, a, b) ? op(e, 1, 1) : op(e, 2, 2);
  return op(e, a, pure(b, c)) && op(e, 0, 0);
}
"""
PLANTS = [
    "  return op(e, op(e, 1, 2), op(e, 3, 4));\n",       # two emitting arguments
    "  int x[2] = {op(e, 1, 2), op(e, 3, 4)};\n",        # an initializer list
    "  return op(e, 1, 2) + op(e, 3, 4);\n",             # a binary operator
    "  return pure(op(e, 1, 2), pure(0, op(e, 3, 4)));\n",  # nested, through a pure call
    "  return pure(e->hooks->load(e, 1), op(e, 3, 4));\n",  # a hook may emit
]


def self_test():
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "codegen"))
        path = os.path.join(tmp, "codegen", "k.c")
        with open(path, "w") as f:
            f.write(CLEAN)
        if check(tmp):
            print("self-test: the clean tree is reported:", check(tmp))
            ok = False
        for plant in PLANTS:
            with open(path, "w") as f:
                f.write(CLEAN.replace("int kernel(", "int planted(vlmc_kernel_emit_t *e) {\n"
                                      + plant + "}\nint kernel("))
            if not check(tmp):
                print("self-test: not caught:", plant.strip())
                ok = False
        shutil.rmtree(os.path.join(tmp, "codegen"))
    print("self-test:", "every planted unsequenced emit caught" if ok else "FAILED")
    return ok


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = check(root)
    for p in problems:
        print(p)
    print(f"check_sequenced_emits: {len(problems)} unsequenced places under codegen/")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
