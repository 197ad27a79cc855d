#!/usr/bin/env python3
"""Tokenizer and chat-template fixtures from transformers (run where transformers 5.17 is).

Writes into OUT_DIR (default tests/fixtures/tokenizer/):
  corpus_ids.txt   one line of space-separated ids per line of corpus.jsonl
                   (AutoTokenizer, add_special_tokens=False, special tokens in the text matched)
  roundtrip.json   the corpus lines where transformers' own decode(encode(s)) != s
  chat_cases.json  chat template + processor expansion cases (see README.md)

Usage: python3 tests/oracle/make_tokenizer_fixtures.py [OUT_DIR]
"""

import gzip
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle_common as oc  # noqa: E402

CORPUS = os.path.join(oc.FIXTURES_DIR, "tokenizer", "corpus.jsonl")
IMAGES = os.path.join(oc.FIXTURES_DIR, "images")
SHAPES = os.path.join(oc.FIXTURES_DIR, "test_image_shapes.png")


def tokenizer_dir():
    """A temporary folder holding tokenizer.json (gunzipped) and the asset's tokenizer_config."""
    tmp = tempfile.mkdtemp(prefix="qwen-tok-")
    with gzip.open(oc.TOKENIZER_GZ, "rb") as src, open(os.path.join(tmp, "tokenizer.json"),
                                                          "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(oc.TOKENIZER_CONFIG, os.path.join(tmp, "tokenizer_config.json"))
    return tmp


def read_corpus():
    with open(CORPUS, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    assert lines[-1] == "", "corpus.jsonl must end with a newline"
    return [json.loads(line) for line in lines[:-1]]


def corpus_fixtures(tok, tok_json_path, out_dir):
    from tokenizers import Tokenizer
    raw = Tokenizer.from_file(tok_json_path)
    corpus = read_corpus()
    lines, not_roundtrip, raw_mismatch = [], [], []
    for i, s in enumerate(corpus):
        ids = tok.encode(s, add_special_tokens=False)
        raw_ids = raw.encode(s, add_special_tokens=False).ids
        if raw_ids != ids:
            raw_mismatch.append({"line": i + 1, "text": s, "transformers": ids,
                                 "tokenizers": raw_ids})
        lines.append(" ".join(str(t) for t in ids))
        back = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if back != s:
            not_roundtrip.append({"line": i + 1, "text": s, "decoded": back, "ids": ids})
    with open(os.path.join(out_dir, "corpus_ids.txt"), "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")
    with open(os.path.join(out_dir, "roundtrip.json"), "w", encoding="utf-8") as f:
        json.dump({"note": "corpus lines (1-based) where transformers decode(encode(s)) != s",
                   "cases": not_roundtrip}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("tokenizer: %d lines, %d do not round-trip, %d differ from raw tokenizers"
          % (len(lines), len(not_roundtrip), len(raw_mismatch)))
    for m in raw_mismatch[:10]:
        print("  raw mismatch line %d: %r" % (m["line"], m["text"]))
    return {"lines": len(lines), "not_roundtrip": len(not_roundtrip),
            "raw_tokenizers_mismatch": raw_mismatch}


def chat_case_specs():
    """(name, messages, image files in message order, add_generation_prompt)."""
    img = {"type": "image"}
    return [
        ("spec_5_2_describe_448",
         [{"role": "user", "content": [img, {"type": "text", "text": "Describe this image."}]}],
         [SHAPES], True),
        ("two_images_with_text",
         [{"role": "user", "content": [
             {"type": "text", "text": "Compare the first image "}, img,
             {"type": "text", "text": " with the second one "}, img,
             {"type": "text", "text": "\nWhich one is wider?"}]}],
         [os.path.join(IMAGES, "scene_336x336.png"), os.path.join(IMAGES, "wide_1024x484.png")],
         True),
        ("system_message",
         [{"role": "system", "content": "You are a careful vision expert. Answer in one word."},
          {"role": "user",
           "content": [img, {"type": "text", "text": "What colour is the top-left?"}]}],
         [os.path.join(IMAGES, "tiny_40x40.png")], True),
        ("multi_turn",
         [{"role": "user", "content": [img, {"type": "text", "text": "What shapes do you see?"}]},
          {"role": "assistant", "content": "A red square, a blue circle and a green triangle."},
          {"role": "user", "content": "Which one is largest?"}],
         [os.path.join(IMAGES, "scene_224x448.png")], True),
        ("multi_turn_no_generation_prompt",
         [{"role": "user", "content": "Hi!"},
          {"role": "assistant", "content": [{"type": "text", "text": "Hello! How can I help?"}]}],
         [], False),
        ("text_only",
         [{"role": "user", "content": "Hello, how are you? \u4f60\u597d\uff01 I'm fine."}],
         [], True),
    ]


def render_with_jinja(template, messages, add_generation_prompt):
    """The template rendered the way transformers does (sandboxed, trim/lstrip blocks)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages,
                                            add_generation_prompt=add_generation_prompt)


def chat_fixtures(tok, out_dir):
    from PIL import Image
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor
    try:
        from transformers import Qwen2VLVideoProcessor
        video = Qwen2VLVideoProcessor()
    except ImportError:  # transformers 4.x: the video processor argument does not exist
        video = None
    with open(oc.CHAT_TEMPLATE_PATH, encoding="utf-8") as f:
        template = f.read()
    ip = Qwen2VLImageProcessor(size={"shortest_edge": oc.MIN_PIXELS,
                                     "longest_edge": oc.MAX_PIXELS})
    kwargs = {"image_processor": ip, "tokenizer": tok, "chat_template": template}
    if video is not None:
        kwargs["video_processor"] = video
    proc = Qwen2_5_VLProcessor(**kwargs)
    cases, problems = [], []
    for name, messages, files, gen in chat_case_specs():
        jinja_text = render_with_jinja(template, messages, gen)
        try:
            text = proc.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
        except Exception as e:  # keep going: the plain jinja rendering is the same template
            problems.append("%s: processor.apply_chat_template failed: %r" % (name, e))
            text = jinja_text
        if text != jinja_text:
            problems.append("%s: processor and plain jinja renderings differ" % name)
        images = [Image.open(p).convert("RGB") for p in files]
        enc = proc(text=[text], images=images or None, return_tensors="pt")
        ids = enc["input_ids"][0].tolist()
        grids = enc["image_grid_thw"].tolist() if images else []
        n_pad = sum(t * h * w // 4 for t, h, w in grids)
        if ids.count(oc.IMAGE_PAD) != n_pad:
            problems.append("%s: %d image pads, grids say %d"
                            % (name, ids.count(oc.IMAGE_PAD), n_pad))
        for (t, h, w), path in zip(grids, files):
            with Image.open(path) as im:
                want = oc.image_grid(im.size[1], im.size[0])
            if (t, h, w) != want:
                problems.append("%s: grid %s, smart_resize says %s" % (name, (t, h, w), want))
        if name == "spec_5_2_describe_448" and ids != oc.spec_5_2_ids(256):
            problems.append("%s: ids differ from spec 5.2 (len %d)" % (name, len(ids)))
        cases.append({"name": name, "messages": messages,
                      "images": [os.path.relpath(p, oc.REPO_ROOT) for p in files],
                      "image_grid_thw": grids, "add_generation_prompt": gen,
                      "text": text, "input_ids": ids})
        print("chat case %-34s %4d ids, grids %s" % (name, len(ids), grids))
    with open(os.path.join(out_dir, "chat_cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for p in problems:
        print("PROBLEM " + p)
    return {"cases": len(cases), "problems": problems}


def main(argv):
    out_dir = argv[1] if len(argv) > 1 else os.path.join(oc.FIXTURES_DIR, "tokenizer")
    os.makedirs(out_dir, exist_ok=True)
    from transformers import AutoTokenizer
    tdir = tokenizer_dir()
    tok = AutoTokenizer.from_pretrained(tdir)
    print("tokenizer class %s, vocab %d" % (type(tok).__name__, len(tok)))
    summary = {"tokenizer_class": type(tok).__name__}
    summary["corpus"] = corpus_fixtures(tok, os.path.join(tdir, "tokenizer.json"), out_dir)
    summary["chat"] = chat_fixtures(tok, out_dir)
    shutil.rmtree(tdir)
    return summary


if __name__ == "__main__":
    result = main(sys.argv)
    print(json.dumps(result, ensure_ascii=False)[:2000])
    sys.exit(1 if result["chat"]["problems"] else 0)
