#!/usr/bin/env python3
"""Writes the preprocessing and model-parity input images into tests/fixtures/images/.

numpy + Pillow only, deterministic: pixels come from closed-form drawings and numpy's legacy
RandomState (whose streams are fixed across numpy versions), so re-running gives identical pixels.
The PNG bytes also depend on Pillow/zlib; consumers must compare decoded pixels, not bytes.
File names are WIDTHxHEIGHT. Sizes (see tests/oracle/README.md for what each one exercises):

  square_448  square_336  wide_1024x484  odd_501x333  thin_30x900  tiny_40x40
  photo_2000x1500  noisy_gradient_320x240
  scene_224x448  scene_336x336  scene_448x672  scene_1036x1036   (flat shape scenes)

Usage: python3 tests/oracle/make_images.py [OUT_DIR]
"""

import os
import sys

import numpy as np
from PIL import Image, ImageDraw

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "fixtures", "images")


def coords(w, h):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    return x, y


def to_u8(a):
    return np.clip(np.rint(a), 0, 255).astype(np.uint8)


def draw_shapes(img, seed, count):
    """Flat, hard-edged shapes in random places; colours from a fixed palette."""
    rs = np.random.RandomState(seed)
    palette = [(220, 30, 30), (30, 60, 220), (30, 170, 60), (240, 200, 20), (150, 40, 190),
               (20, 180, 200), (250, 120, 20), (40, 40, 40), (255, 255, 255), (120, 80, 40)]
    d = ImageDraw.Draw(img)
    w, h = img.size
    for _ in range(count):
        kind = rs.randint(0, 4)
        colour = palette[rs.randint(0, len(palette))]
        x0, y0 = int(rs.randint(0, w - 8)), int(rs.randint(0, h - 8))
        x1 = min(w - 1, x0 + int(rs.randint(8, max(9, w // 3))))
        y1 = min(h - 1, y0 + int(rs.randint(8, max(9, h // 3))))
        if kind == 0:
            d.rectangle([x0, y0, x1, y1], fill=colour)
        elif kind == 1:
            d.ellipse([x0, y0, x1, y1], fill=colour)
        elif kind == 2:
            d.polygon([(x0, y1), ((x0 + x1) // 2, y0), (x1, y1)], fill=colour)
        else:
            d.line([(x0, y0), (x1, y1)], fill=colour, width=int(rs.randint(1, 6)))
    return img


def scene(w, h, seed):
    """Simple flat scene: plain background and a dozen or so flat shapes."""
    rs = np.random.RandomState(seed)
    background = tuple(int(v) for v in rs.randint(200, 250, 3))
    img = Image.new("RGB", (w, h), background)
    return draw_shapes(img, seed + 1, 6 + (w * h) // 40000)


def gradient_with_shapes(w, h, seed):
    x, y = coords(w, h)
    a = np.stack([255 * x / max(1, w - 1), 255 * y / max(1, h - 1),
                  128 + 100 * np.sin((x + y) / 37.0)], axis=-1)
    img = Image.fromarray(to_u8(a))
    return draw_shapes(img, seed, 10)


def wide(w, h):
    """Horizontal gradient, vertical stripes of several widths (edges for the bicubic taps)."""
    x, y = coords(w, h)
    a = np.stack([60 + 150 * x / (w - 1), 90 + 80 * np.cos(y / 40.0), 200 - 150 * x / (w - 1)], -1)
    stripe = ((x // (3 + (x // 128))) % 2 == 0) & (y > h * 0.6)
    a[stripe] = (a[stripe] * 0.3)
    img = Image.fromarray(to_u8(a))
    d = ImageDraw.Draw(img)
    d.ellipse([80, 40, 300, 260], fill=(240, 220, 30))
    d.rectangle([400, 60, 620, 200], fill=(30, 30, 160))
    d.polygon([(700, 250), (860, 40), (1000, 250)], fill=(20, 150, 70))
    for i in range(12):
        d.line([(20 + 80 * i, 270), (60 + 80 * i, 280)], fill=(0, 0, 0), width=1 + i % 3)
    return img


def odd(w, h):
    """7-pixel checkerboard over a gradient: the cell edges land between output pixels."""
    x, y = coords(w, h)
    checker = ((x // 7 + y // 7) % 2).astype(np.float32)
    a = np.stack([40 + 180 * checker, 255 * y / (h - 1), 255 * (1 - x / (w - 1))], -1)
    img = Image.fromarray(to_u8(a))
    ImageDraw.Draw(img).ellipse([150, 60, 350, 260], outline=(255, 255, 0), width=3)
    return img


def thin(w, h):
    """Colour bands down a 30-pixel strip, with 1-pixel dark lines every 13 rows."""
    x, y = coords(w, h)
    a = np.stack([128 + 127 * np.sin(y / 50.0), 128 + 127 * np.cos(y / 80.0),
                  255 * x / (w - 1)], -1)
    a[(y.astype(np.int64) % 13) == 0] = 20
    return Image.fromarray(to_u8(a))


def tiny(w, h):
    """Four quadrants and a one-pixel diagonal: upsampled to 56x56."""
    a = np.zeros((h, w, 3), np.float32)
    a[: h // 2, : w // 2] = (230, 40, 40)
    a[: h // 2, w // 2:] = (40, 200, 60)
    a[h // 2:, : w // 2] = (40, 60, 220)
    a[h // 2:, w // 2:] = (240, 240, 240)
    for i in range(min(w, h)):
        a[i, i] = (0, 0, 0)
    return Image.fromarray(to_u8(a))


def photo(w, h, seed=7):
    """Photo-like: smooth sky-to-ground gradient, soft Gaussian blobs, mild 4-pixel grain.

    The grain is drawn at a quarter of the resolution and repeated so that zlib keeps the PNG
    near 1.2 MB; per-pixel noise would take 3 MB or more.
    """
    rs = np.random.RandomState(seed)
    x, y = coords(w, h)
    t = y / h
    a = np.stack([70 + 120 * t + 20 * np.sin(x / 310.0),
                  110 + 60 * t + 15 * np.cos(y / 170.0 + x / 500.0),
                  200 - 140 * t], -1)
    for _ in range(14):
        cx, cy, r = rs.uniform(0, w), rs.uniform(0, h), rs.uniform(60, 320)
        colour = rs.uniform(-90, 90, 3).astype(np.float32)
        a += np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * r * r))[..., None] * colour
    grain = 4
    noise = rs.normal(0, 2.5, (h // grain + 1, w // grain + 1, 3)).astype(np.float32)
    a += np.repeat(np.repeat(noise, grain, 0), grain, 1)[:h, :w]
    return Image.fromarray(to_u8(a))


def noisy_gradient(w, h, seed=11):
    """Diagonal gradient plus strong per-pixel uniform noise: worst case for resize rounding."""
    rs = np.random.RandomState(seed)
    x, y = coords(w, h)
    base = np.stack([255 * x / (w - 1), 255 * y / (h - 1), 255 * (x + y) / (w + h - 2)], -1)
    return Image.fromarray(to_u8(base + rs.uniform(-48, 48, (h, w, 3))))


def build():
    return {
        "square_448.png": gradient_with_shapes(448, 448, 101),
        "square_336.png": gradient_with_shapes(336, 336, 102),
        "wide_1024x484.png": wide(1024, 484),
        "odd_501x333.png": odd(501, 333),
        "thin_30x900.png": thin(30, 900),
        "tiny_40x40.png": tiny(40, 40),
        "photo_2000x1500.png": photo(2000, 1500),
        "noisy_gradient_320x240.png": noisy_gradient(320, 240),
        "scene_224x448.png": scene(224, 448, 201),
        "scene_336x336.png": scene(336, 336, 202),
        "scene_448x672.png": scene(448, 672, 203),
        "scene_1036x1036.png": scene(1036, 1036, 204),
    }


def main(argv):
    out = argv[1] if len(argv) > 1 else DEFAULT_OUT
    os.makedirs(out, exist_ok=True)
    total = 0
    for name, img in build().items():
        path = os.path.join(out, name)
        img.convert("RGB").save(path, format="PNG", optimize=False, compress_level=9)
        size = os.path.getsize(path)
        total += size
        print("%-28s %4dx%-4d %9d bytes" % (name, img.size[0], img.size[1], size))
    print("total %d bytes" % total)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
