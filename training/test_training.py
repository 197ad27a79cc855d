#!/usr/bin/env python3
"""Checks of the training helpers that need no GPU and no transformers.

  python3 -m unittest discover -s training -p 'test_*.py'

The scene tests need numpy and Pillow; the attention and pixel tests also need torch and are
skipped without it.
"""

import json
import os
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scenes  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # The scene tests still run.
    torch = None

if torch is not None and not hasattr(F, "scaled_dot_product_attention"):
    # torch < 2.0 (Debian 12's python3-torch): the plain formula, enough for these checks.
    def _sdpa(q, k, v, attn_mask=None, scale=None):
        scores = q @ k.transpose(-2, -1) * (scale if scale is not None else q.shape[-1] ** -0.5)
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v
    F.scaled_dot_product_attention = _sdpa


class SceneTest(unittest.TestCase):
    def test_scene_is_a_pure_function_of_seed_and_index(self):
        a = scenes.render(scenes.make_scene(7, 11))
        b = scenes.render(scenes.make_scene(7, 11))
        c = scenes.render(scenes.make_scene(8, 11))
        self.assertTrue(np.array_equal(a, b))
        self.assertFalse(a.shape == c.shape and np.array_equal(a, c))

    def test_shapes_are_placed_without_overlap_and_sorted_left_to_right(self):
        for index in range(200):
            scene = scenes.make_scene(scenes.TRAIN_SEED, index)
            boxes = [it["box"] for it in scene["shapes"]]
            self.assertGreaterEqual(len(boxes), 1)
            centres = [x + w / 2 for x, _, w, _ in boxes]
            self.assertEqual(centres, sorted(centres))
            for i, (x0, y0, w0, h0) in enumerate(boxes):
                self.assertGreaterEqual(x0, 0)
                self.assertLessEqual(x0 + w0, scene["width"])
                self.assertLessEqual(y0 + h0, scene["height"])
                for x1, y1, w1, h1 in boxes[i + 1:]:
                    apart = x0 + w0 <= x1 or x1 + w1 <= x0 or y0 + h0 <= y1 or y1 + h1 <= y0
                    self.assertTrue(apart, f"scene {index}: boxes overlap")

    def test_every_shape_is_drawn_in_its_colour(self):
        scene = scenes.make_scene(scenes.EVAL_SEED, 3)
        img = scenes.render(scene)
        for it in scene["shapes"]:
            x, y, w, h = it["box"]
            patch = img[int(y):int(np.ceil(y + h)), int(x):int(np.ceil(x + w))].reshape(-1, 3)
            hits = np.all(patch == np.asarray(it["rgb"], dtype=np.uint8), axis=1).sum()
            self.assertGreater(hits, 0.2 * w * h, it["shape"])

    def test_answers(self):
        scene = {"shapes": [{"color": "red", "shape": "square"},
                            {"color": "orange", "shape": "star"},
                            {"color": "green", "shape": "triangle"}]}
        self.assertEqual(scenes.describe(scene),
                         "A red square, an orange star and a green triangle.")
        self.assertEqual(scenes.answer(scene, scenes.Q_COUNT), "3.")
        self.assertEqual(scenes.answer(scene, scenes.Q_LEFTMOST_COLOR), "Red.")
        self.assertEqual(scenes.answer(scene, scenes.Q_RIGHTMOST), "A green triangle.")
        one = {"shapes": scene["shapes"][1:2]}
        self.assertEqual(scenes.describe(one), "An orange star.")

    def test_exact_set(self):
        want = [("red", "square"), ("blue", "circle"), ("green", "triangle")]
        self.assertTrue(scenes.exact_set(
            "The image contains a green triangle, a Red square and a blue circle.", want))
        self.assertFalse(scenes.exact_set("A red square and a green triangle.", want))
        self.assertFalse(scenes.exact_set(
            "A red square, a blue circle, a green triangle and a red square.", want))
        self.assertFalse(scenes.exact_set(
            "A red square, a blue circle, a green triangle and a blue star.", want))

    def test_sizes_cover_the_issue(self):
        sizes = {size for size, _ in scenes.IMAGE_SIZES}
        for need in [(224, 448), (336, 336), (448, 448), (448, 672)]:
            self.assertIn(need, sizes)
        self.assertTrue(any(w % 28 or h % 28 for w, h in sizes))

    def test_fixture_candidates_round_trip(self):
        from PIL import Image
        out = tempfile.mkdtemp()
        entries = scenes.write_fixture_candidates(out, 3)
        for e in entries:
            img = np.asarray(Image.open(os.path.join(out, e["file"])).convert("RGB"))
            scene = scenes.make_scene(e["seed"], e["index"], size=(e["width"], e["height"]),
                                      n_shapes=e["n_shapes"])
            self.assertTrue(np.array_equal(img, scenes.render(scene)))
            self.assertEqual(e["pairs"], [list(p) for p in scenes.pairs(scene)])
        json.dumps(entries)

    def test_committed_fixtures_are_the_generator_output(self):
        from PIL import Image
        fixture_dir = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "shapes_scenes")
        with open(os.path.join(fixture_dir, "expected.json")) as f:
            images = json.load(f)["images"]
        self.assertGreaterEqual(len(images), 4)
        for e in images:
            img = np.asarray(Image.open(os.path.join(fixture_dir, e["file"])).convert("RGB"))
            scene = scenes.make_scene(e["seed"], e["index"], size=(e["width"], e["height"]),
                                      n_shapes=e["n_shapes"])
            self.assertEqual(img.shape, (e["height"], e["width"], 3))
            self.assertTrue(np.array_equal(img, scenes.render(scene)), e["file"])
            self.assertEqual(e["pairs"], [list(p) for p in scenes.pairs(scene)])
            self.assertIn(len(e["pairs"]), (2, 3, 4))
            self.assertTrue(scenes.exact_set(e["transformers_answer"], e["pairs"]), e["file"])


def window_segments(grid_h, grid_w, k=4, m=2):
    """cu_window_seqlens (patches) of one image, per spec 3.3, deduplicated."""
    hh, ww = grid_h // m, grid_w // m
    nh, nw = (hh + k - hh % k) // k, (ww + k - ww % k) // k
    cu = [0]
    for a in range(nh):
        for b in range(nw):
            rows = max(0, min(k, hh - a * k))
            cols = max(0, min(k, ww - b * k))
            if rows * cols:
                cu.append(cu[-1] + rows * cols * m * m)
    return cu


@unittest.skipIf(torch is None, "torch is not installed")
class FastPathTest(unittest.TestCase):
    def setUp(self):
        import train  # noqa: F401  (needs torch)
        self.train = train

    class Attn(torch.nn.Module if torch else object):
        def __init__(self, dim, heads):
            super().__init__()
            self.num_heads, self.scaling = heads, (dim // heads) ** -0.5
            self.qkv = torch.nn.Linear(dim, 3 * dim)
            self.proj = torch.nn.Linear(dim, dim)

        def forward(self, hidden_states, cu_seqlens, rotary_pos_emb=None,
                    position_embeddings=None, **kwargs):
            # The per-segment loop of transformers' non-flash path.
            seq = hidden_states.shape[0]
            q, k, v = self.qkv(hidden_states).reshape(seq, 3, self.num_heads, -1) \
                .permute(1, 0, 2, 3).unbind(0)
            cos, sin = position_embeddings
            cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
            rot = FastPathTest._rot
            q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
            q, k, v = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))
            lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
            outs = [F.scaled_dot_product_attention(a, b, c, scale=self.scaling)
                    for a, b, c in zip(*(torch.split(t, lengths, dim=2) for t in (q, k, v)))]
            out = torch.cat(outs, dim=2).transpose(1, 2).reshape(seq, -1)
            return self.proj(out)

    @staticmethod
    def _rot(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def _compare(self, grid_h, grid_w, images, windowed):
        torch.manual_seed(0)
        attn = self.Attn(32, 4).double()
        n = grid_h * grid_w
        x = torch.randn(images * n, 32, dtype=torch.float64)
        angles = torch.randn(images * n, 4, dtype=torch.float64)
        emb = torch.cat([angles, angles], dim=-1)
        pe = (emb.cos(), emb.sin())
        one = window_segments(grid_h, grid_w) if windowed else [0, n]
        cu = [0]
        for i in range(images):
            cu += [c + i * n for c in one[1:]]
        cu = torch.tensor(cu, dtype=torch.int32)
        want = attn(x, cu, position_embeddings=pe)
        attn._stock_forward = attn.forward
        self.train.FastAttention.enabled = True
        self.train.FastAttention.num_images = images
        got = self.train._fast_vision_attention(attn, x, cu, position_embeddings=pe)
        # The fast path rotates in fp32 as transformers does; a wrong mask errs by ~0.1.
        self.assertLess((want - got).abs().max().item(), 1e-6)

    def test_windowed_partial_and_empty_windows(self):
        self._compare(12, 20, 3, True)   # partial windows on both axes
        self._compare(16, 16, 2, True)   # empty padding windows
        self._compare(22, 22, 4, True)   # 300x300 resized to 308x308

    def test_full_attention(self):
        self._compare(12, 20, 3, False)
        self._compare(32, 32, 1, False)

    def test_temporal_copy_round_trip(self):
        half = torch.randn(10, 588)
        full = self.train.restore_temporal_copy(half)
        self.assertEqual(tuple(full.shape), (10, 1176))
        self.assertTrue(torch.equal(self.train._drop_temporal_copy(full), half))
        rows = full.reshape(10, 3, 2, 196)
        self.assertTrue(torch.equal(rows[:, :, 0], rows[:, :, 1]))

    def test_schedule(self):
        lr_at = self.train.lr_at
        self.assertAlmostEqual(lr_at(0, 1000, 1.0, 100, 0.05), 0.01)
        self.assertAlmostEqual(lr_at(99, 1000, 1.0, 100, 0.05), 1.0)
        self.assertAlmostEqual(lr_at(1000, 1000, 1.0, 100, 0.05), 0.05)
        self.assertGreater(lr_at(500, 1000, 1.0, 100, 0.05), lr_at(600, 1000, 1.0, 100, 0.05))


if __name__ == "__main__":
    unittest.main()
