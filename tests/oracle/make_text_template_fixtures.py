#!/usr/bin/env python3
"""Renders of the chat templates vlmc knows besides Qwen2-VL's (whose cases come from
transformers on the device machine: make_parity_fixtures.py): the text-only Qwen2-, Qwen2.5- and
Qwen3-Instruct's (tests/fixtures/chat_templates/{qwen2,qwen2_5,qwen3}_text.jinja) and
Qwen3-VL-Instruct's (qwen3_vl.jinja, with image and video turns too) for a set of
conversations, written to tests/fixtures/chat_templates/text_template_cases.json.

The renderer is jinja2 set up as transformers sets it up for apply_chat_template
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, raise_exception,
tools=None): that is the engine transformers itself calls, so this runs anywhere jinja2 is
(no model, no transformers). The cases have no tools: vlmc passes none.

Usage (repository root): python3 tests/oracle/make_text_template_fixtures.py [--check]
  --check: render again and compare with the committed file (exit 1 on a difference).
"""
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TEMPLATES = os.path.join(ROOT, "tests", "fixtures", "chat_templates")
OUT = os.path.join(TEMPLATES, "text_template_cases.json")
KINDS = {"qwen2_text": "qwen2_text.jinja", "qwen2_5_text": "qwen2_5_text.jinja",
         "qwen3_text": "qwen3_text.jinja", "qwen3_vl": "qwen3_vl.jinja"}

U = lambda t: {"role": "user", "content": t}  # noqa: E731
A = lambda t: {"role": "assistant", "content": t}  # noqa: E731
S = lambda t: {"role": "system", "content": t}  # noqa: E731
CASES = [
    ("one_user", [U("Hello there.")], True, None),
    ("system_user", [S("Be brief."), U("Hi")], True, None),
    ("no_generation_prompt", [U("Hi")], False, None),
    ("multi_turn", [U("Hi"), A("Hello! How can I help?"), U("Tell me a joke.")], True, None),
    ("later_system", [U("Hi"), S("Switch to French."), U("Bonjour")], True, None),
    ("text_parts", [{"role": "user", "content": [{"type": "text", "text": "part one"}]}], True, None),
    ("think_in_history",
     [U("2+2?"), A("<think>\nadd them\n</think>\n\n4"), U("and 3+3?")], True, None),
    ("think_last_assistant",
     [U("2+2?"), A("<think>\nadd them\n</think>\n\n4")], False, None),
    ("assistant_after_query_no_think", [U("hi"), A("hello"), A("again")], False, None),
    ("nested_think",
     [U("q"), A("\n<think>a<think>\nb\n</think>mid</think>\n\nend")], False, None),
    ("thinking_off", [U("Hi")], True, False),
    ("thinking_on", [U("Hi")], True, True),
]

IMG = {"type": "image"}
VID = {"type": "video"}
T = lambda t: {"type": "text", "text": t}  # noqa: E731
# Vision turns, for the Qwen3-VL template only: (name, messages, add_generation_prompt,
# add_vision_id).
VL_CASES = [
    ("image_then_text", [{"role": "user", "content": [IMG, T("Describe this image.")]}], True, False),
    ("two_images_numbered",
     [{"role": "user", "content": [IMG, T("and"), IMG, T("differ how?")]}], True, True),
    ("video_numbered", [{"role": "user", "content": [VID, T("What happens?")]}], True, True),
    ("images_across_turns",
     [S("Be brief."), {"role": "user", "content": [IMG, T("What is it?")]},
      A("A square."), {"role": "user", "content": [T("And this one? "), IMG]}], True, True),
    ("system_parts", [{"role": "system", "content": [T("Answer "), T("in French.")]},
                      {"role": "user", "content": [IMG]}], True, False),
    ("assistant_parts", [U("Hi"), {"role": "assistant", "content": [T("Hello"), T(" there")]}],
     False, False),
]


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render_all():
    env = environment()
    out = []
    for kind, file in KINDS.items():
        with open(os.path.join(TEMPLATES, file), encoding="utf-8") as f:
            template = env.from_string(f.read())
        for name, messages, gen, thinking in CASES:
            if kind != "qwen3_text" and thinking is not None:
                continue
            kwargs = {} if thinking is None else {"enable_thinking": thinking}
            try:
                text = template.render(messages=messages, tools=None, documents=None,
                                       add_generation_prompt=gen, **kwargs)
            except Exception as e:  # a case a template cannot render is recorded as such
                text = None
                kwargs["error"] = repr(e)
            out.append({"kind": kind, "name": name, "messages": messages,
                        "add_generation_prompt": gen,
                        "enable_thinking": thinking, "text": text})
        if kind != "qwen3_vl":
            continue
        for name, messages, gen, vision_id in VL_CASES:
            text = template.render(messages=messages, tools=None, documents=None,
                                   add_generation_prompt=gen, add_vision_id=vision_id)
            out.append({"kind": kind, "name": name, "messages": messages,
                        "add_generation_prompt": gen, "add_vision_id": vision_id,
                        "enable_thinking": None, "text": text})
    return {"renderer": "jinja2 %s, transformers' apply_chat_template settings" % jinja2.__version__,
            "cases": out}


def main(argv):
    data = render_all()
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if "--check" in argv:  # the renders, whichever jinja2 3.x made the file
        with open(OUT, encoding="utf-8") as f:
            committed = json.load(f)
        same = committed["cases"] == data["cases"]
        print("text_template_cases.json: %d cases %s (committed by %s, checked with jinja2 %s)"
              % (len(data["cases"]), "equal" if same else "DIFFER", committed["renderer"],
                 jinja2.__version__))
        return 0 if same else 1
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote %s: %d cases" % (os.path.relpath(OUT, ROOT), len(data["cases"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
