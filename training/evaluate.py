#!/usr/bin/env python3
"""Evaluate the shapes model with transformers: held-out scenes, the bug report's test image and
the committed fixtures.

Runs where torch and transformers are installed (the GPU machine; CPU works too, slowly):

  python3 training/evaluate.py --weights assets/shapes-vl --n 200 --out eval.json

`--weights` is a folder with config.json and model.safetensors (assets/shapes-vl holds them);
the processor files come from assets/shapes-vl and the tokenizer from
assets/qwen-tokenizer/tokenizer.json.gz (gunzipped into a scratch folder, as transformers cannot
read it compressed). The main number is exact-set accuracy: the answer to "What shapes and colors
are in this image? Answer briefly." names exactly the scene's (colour, shape) pairs.
"""

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import scenes  # noqa: E402

ASSET_DIR = os.path.join(REPO, "assets", "shapes-vl")
TOKENIZER_GZ = os.path.join(REPO, "assets", "qwen-tokenizer", "tokenizer.json.gz")
PROCESSOR_FILES = ("tokenizer_config.json", "chat_template.jinja", "preprocessor_config.json",
                   "generation_config.json")
WEIGHT_FILES = ("config.json", "model.safetensors")
TEST_IMAGE = os.path.join(REPO, "tests", "fixtures", "test_image_shapes.png")
FIXTURE_DIR = os.path.join(REPO, "tests", "fixtures", "shapes_scenes")
TEST_IMAGE_WORDS = ("square", "circle", "triangle", "red", "blue", "green")
IMAGE_PAD_ID = 151655


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def prepare_model_dir(dst, weights_dir=None):
    """A folder transformers can load: processor files, tokenizer.json, and optionally weights."""
    os.makedirs(dst, exist_ok=True)
    for name in PROCESSOR_FILES:
        shutil.copyfile(os.path.join(ASSET_DIR, name), os.path.join(dst, name))
    with gzip.open(TOKENIZER_GZ, "rb") as src:
        with open(os.path.join(dst, "tokenizer.json"), "wb") as out:
            shutil.copyfileobj(src, out)
    if weights_dir is not None:
        for name in WEIGHT_FILES:
            shutil.copyfile(os.path.join(weights_dir, name), os.path.join(dst, name))
    return dst


def expected_prompt(question):
    """The official Qwen2-VL template's rendering of [user: image, question] + generation prompt."""
    return ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
            f"<|vision_start|><|image_pad|><|vision_end|>{question}<|im_end|>\n"
            "<|im_start|>assistant\n")


def chat_prompt(processor, question):
    content = [{"type": "image"}, {"type": "text", "text": question}]
    messages = [{"role": "user", "content": content}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    if prompt != expected_prompt(question):
        raise RuntimeError(f"chat template rendered {prompt!r}, want {expected_prompt(question)!r}")
    return prompt


def load_processor(model_dir):
    from transformers import AutoProcessor
    processor = AutoProcessor.from_pretrained(model_dir)
    processor.tokenizer.padding_side = "left"
    return processor


def load_model(model_dir, device, dtype_name="float32"):
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype_name]
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(model_dir, dtype=dtype)
    return model.to(device).eval()


def generate_answers(model, processor, images, question, max_new_tokens=48):
    """Greedy answers for images of one size (equal prompt lengths, so no padding is needed)."""
    import torch
    prompt = chat_prompt(processor, question)
    enc = processor(text=[prompt] * len(images), images=images, padding=True, return_tensors="pt")
    if not bool(enc["attention_mask"].all()):
        raise RuntimeError("generate_answers needs images that give equal prompt lengths")
    enc = enc.to(model.device)
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)
    new_tokens = out[:, enc["input_ids"].shape[1]:]
    return processor.batch_decode(new_tokens, skip_special_tokens=True)


def _pil(array):
    from PIL import Image
    return Image.fromarray(array, "RGB")


def eval_heldout(model, processor, n, seed=scenes.EVAL_SEED, batch=32):
    """Exact-set accuracy on scenes 0..n-1 of the evaluation stream (batched by image size)."""
    by_size = {}
    for index in range(n):
        scene = scenes.make_scene(seed, index)
        by_size.setdefault((scene["width"], scene["height"]), []).append(scene)
    records = []
    for size in sorted(by_size):
        group = by_size[size]
        for start in range(0, len(group), batch):
            chunk = group[start:start + batch]
            images = [_pil(scenes.render(sc)) for sc in chunk]
            answers = generate_answers(model, processor, images, scenes.Q_DESCRIBE)
            for sc, ans in zip(chunk, answers):
                records.append({"index": sc["index"], "size": list(size), "answer": ans,
                                "expected": scenes.describe(sc),
                                "exact_set": scenes.exact_set(ans, scenes.pairs(sc)),
                                "exact_text": ans.strip() == scenes.describe(sc)})
    records.sort(key=lambda r: r["index"])
    n_set = sum(r["exact_set"] for r in records)
    n_text = sum(r["exact_text"] for r in records)
    per_size = {}
    for r in records:
        key = f"{r['size'][0]}x{r['size'][1]}"
        ok, total = per_size.get(key, (0, 0))
        per_size[key] = (ok + r["exact_set"], total + 1)
    return {"seed": seed, "n": len(records), "exact_set": n_set, "exact_text": n_text,
            "exact_set_rate": n_set / max(1, len(records)),
            "per_size": {k: f"{ok}/{total}" for k, (ok, total) in sorted(per_size.items())},
            "failures": [r for r in records if not r["exact_set"]][:40],
            "records": records}


def make_bug_report_image(path):
    """The bug report's Pillow snippet: 448x448, three shapes on (245,245,245)."""
    from PIL import Image, ImageDraw
    img = Image.new("RGB", (448, 448), (245, 245, 245))
    d = ImageDraw.Draw(img)
    d.rectangle([40, 60, 200, 220], fill=(220, 30, 30))
    d.ellipse([250, 80, 410, 240], fill=(30, 60, 220))
    d.polygon([(90, 400), (230, 260), (370, 400)], fill=(30, 170, 60))
    img.save(path)


def eval_test_image(model, processor, path=TEST_IMAGE):
    from PIL import Image
    source = path
    if not os.path.exists(path):
        source = os.path.join(tempfile.mkdtemp(), "test_image_shapes.png")
        make_bug_report_image(source)
    image = Image.open(source).convert("RGB")
    answer = generate_answers(model, processor, [image], scenes.Q_DESCRIBE)[0]
    missing = [w for w in TEST_IMAGE_WORDS if w not in answer.lower()]
    return {"path": path, "generated_here": source != path, "answer": answer,
            "missing_words": missing, "ok": not missing}


def eval_fixtures(model, processor, fixture_dir=FIXTURE_DIR, listing="expected.json"):
    """Answers for the committed fixture PNGs, plus a check that the generator re-creates them."""
    from PIL import Image
    path = os.path.join(fixture_dir, listing)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        entries = json.load(f)
    entries = entries["images"] if isinstance(entries, dict) else entries
    results = []
    for e in entries:
        image = Image.open(os.path.join(fixture_dir, e["file"])).convert("RGB")
        regenerated = scenes.render(scenes.make_scene(e["seed"], e["index"],
                                                      size=(e["width"], e["height"]),
                                                      n_shapes=e["n_shapes"]))
        answer = generate_answers(model, processor, [image], e["question"])[0]
        results.append({"file": e["file"], "answer": answer,
                        "exact_set": scenes.exact_set(answer, e["pairs"]),
                        "regenerated_identical": bool(np.array_equal(regenerated,
                                                                     np.asarray(image)))})
    return results


def evaluate_all(model_dir, device, n, dtype_name="float32", fixture_listing="expected.json"):
    """Every evaluation on the checkpoint in model_dir, loaded fresh (stock transformers code)."""
    t0 = time.time()
    processor = load_processor(model_dir)
    model = load_model(model_dir, device, dtype_name)
    result = {"dtype": dtype_name}
    result["test_image"] = eval_test_image(model, processor)
    log(f"test image ({dtype_name}): {result['test_image']['answer']!r}")
    result["fixtures"] = eval_fixtures(model, processor, listing=fixture_listing)
    if result["fixtures"] is not None:
        for r in result["fixtures"]:
            log(f"fixture {r['file']}: {r['answer']!r} exact_set={r['exact_set']} "
                f"regenerated_identical={r['regenerated_identical']}")
    if n > 0:
        result["heldout"] = eval_heldout(model, processor, n)
        h = result["heldout"]
        log(f"held-out ({dtype_name}): exact set {h['exact_set']}/{h['n']}, "
            f"exact text {h['exact_text']}/{h['n']}, per size {h['per_size']}")
        for r in h["failures"][:12]:
            log(f"  miss #{r['index']} {r['size']}: got {r['answer']!r} want {r['expected']!r}")
    result["seconds"] = round(time.time() - t0, 1)
    return result


def main(argv):
    parser = argparse.ArgumentParser(description="Evaluate the shapes model with transformers.")
    parser.add_argument("--weights", default=ASSET_DIR,
                        help="folder with config.json and model.safetensors")
    parser.add_argument("--n", type=int, default=200, help="held-out scenes (evaluation stream)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--device", default=None)
    parser.add_argument("--fixture-listing", default="expected.json")
    parser.add_argument("--out", default=None, help="write the full results as JSON here")
    args = parser.parse_args(argv)
    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model_dir = prepare_model_dir(tempfile.mkdtemp(prefix="shapes-vl-"), args.weights)
    result = evaluate_all(model_dir, device, args.n, args.dtype, args.fixture_listing)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
