#!/usr/bin/env python3
"""Writes a tool's manual page (roff, man(7)) from its own --help, at build time, so that the
page says exactly what the tool does (docs/cli.md). The help texts follow one layout: a usage
line, prose, and option lines that start with "  -" whose description column continues on the
lines indented to it. For vlmc, every subcommand's --help becomes a section of its own.

    man_page.py TOOL_BINARY NAME "one-line summary" OUT.1 [--subcommands]
"""
import datetime
import os
import re
import subprocess
import sys

SEE_ALSO = {"vlmc": "vlmc-run(1), vlmc-serve(1)", "vlmc-run": "vlmc(1), vlmc-serve(1)",
            "vlmc-serve": "vlmc(1), vlmc-run(1)"}


def help_text(argv):
    out = subprocess.run(argv + ["--help"], capture_output=True, text=True, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        sys.exit(f"man_page.py: {' '.join(argv)} --help failed: {out.stderr.strip()}")
    return out.stdout


def esc(text):
    """Text for roff: backslashes and hyphens escaped, a leading dot or quote defused."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text[:1] in (".", "'") else text


def option_column(line):
    """The option part of an option line and where its description starts (or None)."""
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    gap = re.search(r"\S( {2,})\S", body)
    if not gap:
        return body.rstrip(), None
    return body[:gap.start(1)], indent + gap.end(1) - 1


def render(help_str):
    """roff for one help text: its usage lines, prose paragraphs and a .TP per option."""
    lines = help_str.rstrip("\n").split("\n")
    out, usage = [], []
    while lines and (lines[0].startswith("usage:") or (usage and lines[0].startswith("      "))):
        usage.append(lines.pop(0).replace("usage:", "", 1).strip())
    synopsis = []
    for u in usage:
        synopsis += [".nf", ".B " + esc(u), ".fi"]
    desc_col = None
    para = []

    def flush():
        if para:
            out.extend([".PP", esc(" ".join(para))])
            para.clear()

    for line in lines:
        if not line.strip():
            flush()
            desc_col = None
            continue
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        term_line = stripped.startswith("-") or re.match(r"\S+( \S+)*? {2,}\S", stripped)
        if term_line and 2 <= indent < 8:  # an option or a term; deeper: a description line
            flush()
            opts, col = option_column(line)
            out += [".TP", ".B " + esc(opts)]
            desc_col = col
            if col is not None:
                out.append(esc(line[col:].strip()))
            continue
        if desc_col is not None and indent >= 8:  # the description column continues
            out.append(esc(stripped))
            continue
        if desc_col is None and out and out[-1].startswith(".B ") and indent >= 8:
            out.append(esc(stripped))  # an option line that had no room for its description
            desc_col = indent
            continue
        desc_col = None
        if stripped.endswith(":") and indent == 0 and len(stripped) < 40:
            flush()
            out += [".PP", ".B " + esc(stripped[:-1])]
            continue
        para.append(stripped)
    flush()
    return synopsis, out


def main():
    args = sys.argv[1:]
    subcommands = "--subcommands" in args
    args = [a for a in args if a != "--subcommands"]
    if len(args) != 4:
        sys.exit(__doc__)
    binary, name, summary, out_path = args
    version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             check=False).stdout.split("\n")[0].strip() or name
    date = datetime.datetime.fromtimestamp(
        int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or datetime.datetime.now().timestamp(),
        tz=datetime.timezone.utc).strftime("%Y-%m-%d")
    page = [f'.TH {name.upper()} 1 "{date}" "{esc(version)}" "vlmc manual"',
            ".SH NAME", f"{esc(name)} \\- {esc(summary)}"]
    main_help = help_text([binary])
    synopsis, body = render(main_help)
    page += [".SH SYNOPSIS"] + synopsis + [".SH DESCRIPTION"] + body
    if subcommands:
        names = []
        on = False
        for line in main_help.split("\n"):
            if line.startswith("commands:"):
                on = True
            elif on and re.match(r"^  [a-z]", line):
                names.append(line.split()[0])
            elif on and not line.strip():
                on = False
        page.append(".SH COMMANDS")
        for sub in names:
            synopsis, body = render(help_text([binary, sub]))
            page += [f".SS {esc(name)} {esc(sub)}"] + synopsis + body
    page += [".SH EXIT STATUS",
             "0 done, 1 a failure (named on standard error), 2 a usage error; "
             "a command's own text above says where it differs.",
             ".SH SEE ALSO", SEE_ALSO.get(name, "vlmc(1)") +
             ", and docs/cli.md in the source tree (JSON outputs, completion)."]
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(page) + "\n")


if __name__ == "__main__":
    main()
