#!/usr/bin/env python3
"""Procedural shape scenes for training and testing the tiny Qwen2.5-VL (issue 6).

Everything here is numpy-only and deterministic: scene `i` of stream `seed` is a pure function of
(seed, i), drawn from `numpy.random.default_rng([seed, i])`, and the pixels are rasterised with
plain float64 arithmetic (no Pillow drawing), so the same scene comes out bit-identical on any
machine. Pillow is only used to read and write PNG files.

A scene is 1 to 4 filled, non-overlapping shapes (square, circle, triangle, star) in six colours
(red, green, blue, yellow, orange, purple) on a light background. Answers list the shapes from
left to right by the x coordinate of their bounding-box centre, e.g.
"A red square, a green triangle and a blue circle."

Command line:
  scenes.py render SEED INDEX OUT.png [--size WxH]   draw one scene, print its answers
  scenes.py fixtures OUT_DIR [--count N]             write held-out fixture candidates
"""

import argparse
import json
import os
import re
import sys

import numpy as np

COLORS = {
    "red": (220, 30, 30),
    "green": (30, 170, 60),
    "blue": (30, 60, 220),
    "yellow": (235, 200, 25),
    "orange": (245, 135, 20),
    "purple": (140, 50, 190),
}
SHAPES = ("square", "circle", "triangle", "star")

# (width, height) and relative weight. 448x448 is the bug report's test image size and gets the
# largest share; 224x448 (both orientations), 336x336, 448x672 (both orientations) are the sizes
# issue 6 names; 300x300, 500x375, 375x500 are not multiples of 28 and go through the
# processor's bicubic resize (to 308x308, 504x364, 364x504).
IMAGE_SIZES = (
    ((448, 448), 24),
    ((336, 336), 12),
    ((224, 448), 7),
    ((448, 224), 7),
    ((448, 672), 8),
    ((672, 448), 8),
    ((224, 224), 7),
    ((300, 300), 9),
    ((500, 375), 9),
    ((375, 500), 9),
)

# How many shapes a scene has: weights for 1, 2, 3, 4.
SHAPE_COUNT_WEIGHTS = (0.15, 0.25, 0.30, 0.30)

Q_DESCRIBE = "What shapes and colors are in this image? Answer briefly."
Q_COUNT = "How many shapes are in this image? Answer briefly."
Q_LEFTMOST_COLOR = "What color is the leftmost shape? Answer briefly."
Q_RIGHTMOST = "What is the rightmost shape? Answer briefly."
QUESTIONS = (Q_DESCRIBE, Q_COUNT, Q_LEFTMOST_COLOR, Q_RIGHTMOST)
QUESTION_WEIGHTS = (0.70, 0.10, 0.10, 0.10)

# Streams. Training uses TRAIN_SEED, evaluation EVAL_SEED, committed fixtures FIXTURE_SEED; the
# SeedSequence of [seed, i] makes the streams disjoint.
TRAIN_SEED = 1
EVAL_SEED = 2
FIXTURE_SEED = 3
# Salt for the per-batch image size of training batches (one size per batch).
_BATCH_SIZE_SALT = 0x5A17


def _pick(rng, weights):
    w = np.asarray(weights, dtype=np.float64)
    return int(rng.choice(len(w), p=w / w.sum()))


def _background(rng):
    """Light: the bug report's (245,245,245) often, white sometimes, else a light tint."""
    u = rng.random()
    if u < 0.40:
        return (245, 245, 245)
    if u < 0.55:
        return (255, 255, 255)
    gray = int(rng.integers(222, 253))
    tint = rng.integers(-8, 9, size=3)
    return tuple(int(v) for v in np.clip(gray + tint, 0, 255))


def _color_rgb(rng, name):
    base = np.asarray(COLORS[name], dtype=np.int64)
    return tuple(int(v) for v in np.clip(base + rng.integers(-15, 16, size=3), 0, 255))


def _shape_extent(rng, shape, s):
    """Bounding-box width and height of a shape whose nominal size is s pixels."""
    if shape == "triangle":
        # Wide and flat to tall and narrow; the bug report's triangle is 280 wide, 140 high.
        return s * rng.uniform(0.9, 1.8), s * rng.uniform(0.65, 1.0)
    return s, s


def _geometry(rng, shape, x0, y0, w, h):
    """Shape parameters inside the box (x0, y0, w, h): a polygon or a circle."""
    if shape == "square":
        return {"polygon": [(x0, y0), (x0 + w, y0), (x0 + w, y0 + h), (x0, y0 + h)]}
    if shape == "circle":
        return {"circle": (x0 + w / 2, y0 + h / 2, w / 2)}
    if shape == "triangle":
        apex = 0.5 if rng.random() < 0.6 else rng.uniform(0.25, 0.75)
        return {"polygon": [(x0 + apex * w, y0), (x0 + w, y0 + h), (x0, y0 + h)]}
    # Five-pointed star, first point up; inner radius 0.45 of the outer one.
    cx, cy, r_out = x0 + w / 2, y0 + h / 2, w / 2
    points = []
    for k in range(10):
        r = r_out if k % 2 == 0 else 0.45 * r_out
        angle = -np.pi / 2 + k * np.pi / 5
        points.append((cx + r * np.cos(angle), cy + r * np.sin(angle)))
    return {"polygon": points}


def _boxes_clear(box, others, gap, min_dx):
    x0, y0, w, h = box
    cx = x0 + w / 2
    for ox, oy, ow, oh in others:
        separated = (x0 + w + gap <= ox or ox + ow + gap <= x0 or
                     y0 + h + gap <= oy or oy + oh + gap <= y0)
        # Distinct centre x keeps "left to right" unambiguous.
        if not separated or abs(cx - (ox + ow / 2)) < min_dx:
            return False
    return True


def _place(rng, shape, width, height, boxes):
    """Size and position for one shape that clears the boxes already placed, or None."""
    short = min(width, height)
    margin, gap, min_dx = 4.0, 6.0, max(6.0, 0.03 * width)
    scale = 1.0
    for attempt in range(400):
        if attempt % 50 == 49:
            scale *= 0.85
        # At least 40 px (about three 14-px patches), so a small star is still a star.
        s = max(40.0, short * rng.uniform(0.15, 0.40) * scale)
        w, h = _shape_extent(rng, shape, s)
        if w > width - 2 * margin or h > height - 2 * margin:
            continue
        x0 = rng.uniform(margin, width - margin - w)
        y0 = rng.uniform(margin, height - margin - h)
        if _boxes_clear((x0, y0, w, h), boxes, gap, min_dx):
            return x0, y0, w, h
    return None


def make_scene(seed, index, size=None, n_shapes=None):
    """Scene `index` of stream `seed` as a dict; size (w, h) and n_shapes may be forced."""
    rng = np.random.default_rng([seed, index])
    size_pick = _pick(rng, [wt for _, wt in IMAGE_SIZES])
    width, height = size if size is not None else IMAGE_SIZES[size_pick][0]
    count_pick = _pick(rng, SHAPE_COUNT_WEIGHTS) + 1
    count = n_shapes if n_shapes is not None else count_pick
    background = _background(rng)
    # Distinct (colour, shape) pairs, so the expected answer is a set.
    pairs = [(c, s) for c in COLORS for s in SHAPES]
    chosen = rng.choice(len(pairs), size=count, replace=False)
    shapes, boxes = [], []
    for k in chosen:
        color, shape = pairs[int(k)]
        box = _place(rng, shape, width, height, boxes)
        if box is None:
            continue  # Crowded small image: keep the shapes that fit.
        boxes.append(box)
        item = {"shape": shape, "color": color, "rgb": _color_rgb(rng, color), "box": box}
        item.update(_geometry(rng, shape, *box))
        shapes.append(item)
    shapes.sort(key=lambda it: it["box"][0] + it["box"][2] / 2)
    return {"seed": seed, "index": index, "width": width, "height": height,
            "background": background, "shapes": shapes}


def _polygon_mask(xs, ys, points):
    """Even-odd rule at pixel centres (xs, ys: 2-D grids); works for the concave star too."""
    inside = np.zeros(xs.shape, dtype=bool)
    n = len(points)
    for k in range(n):
        x1, y1 = points[k]
        x2, y2 = points[(k + 1) % n]
        if y1 == y2:
            continue
        crosses = (y1 > ys) != (y2 > ys)
        x_at = (x2 - x1) * (ys - y1) / (y2 - y1) + x1
        inside ^= crosses & (xs < x_at)
    return inside


def render(scene):
    """The scene as an H x W x 3 uint8 array."""
    width, height = scene["width"], scene["height"]
    img = np.empty((height, width, 3), dtype=np.uint8)
    img[:, :] = scene["background"]
    for item in scene["shapes"]:
        x0, y0, w, h = item["box"]
        c0, r0 = max(0, int(np.floor(x0)) - 1), max(0, int(np.floor(y0)) - 1)
        c1, r1 = min(width, int(np.ceil(x0 + w)) + 1), min(height, int(np.ceil(y0 + h)) + 1)
        ys, xs = np.mgrid[r0:r1, c0:c1].astype(np.float64) + 0.5
        if "circle" in item:
            cx, cy, r = item["circle"]
            mask = (xs - cx) ** 2 + (ys - cy) ** 2 <= r * r
        else:
            mask = _polygon_mask(xs, ys, item["polygon"])
        img[r0:r1, c0:c1][mask] = item["rgb"]
    return img


def pick_question(seed, index):
    """Which question scene (seed, index) is asked during training (its own rng stream)."""
    rng = np.random.default_rng([seed, index, 1])
    return QUESTIONS[_pick(rng, QUESTION_WEIGHTS)]


def batch_image_size(seed, batch_index):
    """Image size shared by every scene of training batch `batch_index`."""
    rng = np.random.default_rng([seed, _BATCH_SIZE_SALT, batch_index])
    return IMAGE_SIZES[_pick(rng, [wt for _, wt in IMAGE_SIZES])][0]


def _phrase(item):
    """"a red square", "an orange star"."""
    article = "an" if item["color"][0] in "aeiou" else "a"
    return f"{article} {item['color']} {item['shape']}"


def describe(scene):
    """Canonical answer to Q_DESCRIBE: the shapes left to right."""
    phrases = [_phrase(it) for it in scene["shapes"]]
    if len(phrases) == 1:
        text = phrases[0]
    else:
        text = ", ".join(phrases[:-1]) + " and " + phrases[-1]
    return text[0].upper() + text[1:] + "."


def answer(scene, question):
    shapes = scene["shapes"]
    if question == Q_DESCRIBE:
        return describe(scene)
    if question == Q_COUNT:
        return f"{len(shapes)}."
    if question == Q_LEFTMOST_COLOR:
        return shapes[0]["color"].capitalize() + "."
    if question == Q_RIGHTMOST:
        text = _phrase(shapes[-1])
        return text[0].upper() + text[1:] + "."
    raise ValueError(f"unknown question: {question!r}")


def pairs(scene):
    """(colour, shape) pairs left to right."""
    return [(it["color"], it["shape"]) for it in scene["shapes"]]


_PAIR_RE = re.compile(r"\b(" + "|".join(COLORS) + r")\s+(" + "|".join(SHAPES) + r")s?\b")


def parse_pairs(text):
    """(colour, shape) pairs named in a free-text answer, in order of appearance."""
    return [(m.group(1), m.group(2)) for m in _PAIR_RE.finditer(text.lower())]


def exact_set(text, expected_pairs):
    """True when the answer names exactly the expected pairs, each once, nothing else."""
    got = parse_pairs(text)
    return len(got) == len(expected_pairs) and set(got) == set(map(tuple, expected_pairs))


def save_png(array, path):
    from PIL import Image
    Image.fromarray(array, "RGB").save(path, optimize=True)


def _parse_size(text):
    w, h = text.lower().split("x")
    return int(w), int(h)


def write_fixture_candidates(out_dir, count):
    """Held-out scenes at 336x336 and 448x672 (width x height) with 2-4 shapes, plus a JSON list."""
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    for index in range(count):
        size = (336, 336) if index % 2 == 0 else (448, 672)
        n_shapes = 2 + index % 3
        scene = make_scene(FIXTURE_SEED, index, size=size, n_shapes=n_shapes)
        name = f"scene_{size[0]}x{size[1]}_{index:02d}.png"
        save_png(render(scene), os.path.join(out_dir, name))
        entries.append({"file": name, "seed": FIXTURE_SEED, "index": index,
                        "width": size[0], "height": size[1], "n_shapes": n_shapes,
                        "question": Q_DESCRIBE,
                        "pairs": [list(p) for p in pairs(scene)],
                        "reference_answer": describe(scene)})
    return entries


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_render = sub.add_parser("render")
    p_render.add_argument("seed", type=int)
    p_render.add_argument("index", type=int)
    p_render.add_argument("out")
    p_render.add_argument("--size", type=_parse_size)
    p_fix = sub.add_parser("fixtures")
    p_fix.add_argument("out_dir")
    p_fix.add_argument("--count", type=int, default=8)
    args = parser.parse_args(argv)
    if args.cmd == "render":
        scene = make_scene(args.seed, args.index, size=args.size)
        save_png(render(scene), args.out)
        for q in QUESTIONS:
            print(f"{q} -> {answer(scene, q)}")
    else:
        entries = write_fixture_candidates(args.out_dir, args.count)
        print(json.dumps(entries, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
