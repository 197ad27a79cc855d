"""Pure-Python reference pieces shared by the oracle scripts (no torch, no transformers).

Everything here follows /work/shared/spec/qwen2_5_vl.md and is checked against the spec's worked
examples by selftest.py, so the device scripts can cross-check transformers against it (and the
other way round) instead of trusting either side blindly.
"""

import math
import os
import random

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORACLE_DIR = os.path.join(REPO_ROOT, "tests", "oracle")
FIXTURES_DIR = os.path.join(REPO_ROOT, "tests", "fixtures")
CHAT_TEMPLATE_PATH = os.path.join(ORACLE_DIR, "qwen2_vl_chat_template.jinja")
TOKENIZER_GZ = os.path.join(REPO_ROOT, "assets", "qwen-tokenizer", "tokenizer.json.gz")
TOKENIZER_CONFIG = os.path.join(REPO_ROOT, "assets", "qwen-tokenizer", "tokenizer_config.json")

MIN_PIXELS = 3136
MAX_PIXELS = 12845056
PATCH = 14
MERGE = 2
TEMPORAL = 2
WINDOW = 112
IMAGE_MEAN = [0.48145466, 0.4578275, 0.40821073]
IMAGE_STD = [0.26862954, 0.26130258, 0.27577711]
ROW_FEATURES = 3 * TEMPORAL * PATCH * PATCH  # 1176

# Real Qwen2.5-VL special ids (spec §5.3).
IM_START, IM_END = 151644, 151645
VISION_START, VISION_END, IMAGE_PAD = 151652, 151653, 151655


def smart_resize(height, width, factor=PATCH * MERGE, min_pixels=MIN_PIXELS,
                 max_pixels=MAX_PIXELS):
    """Spec §2.1 (transformers 5.x semantics): returns (h, w), multiples of `factor`."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect ratio above 200: %dx%d" % (width, height))
    # Python's round() is round-half-to-even, which is what the reference uses.
    h_bar = factor * round(height / factor)
    w_bar = factor * round(width / factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, factor * math.floor(height / beta / factor))
        w_bar = max(factor, factor * math.floor(width / beta / factor))
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = factor * math.ceil(height * beta / factor)
        w_bar = factor * math.ceil(width * beta / factor)
    return h_bar, w_bar


def image_grid(height, width, **kw):
    """(t, h, w) in patch units for one still image of the given original size."""
    h_bar, w_bar = smart_resize(height, width, **kw)
    return (1, h_bar // PATCH, w_bar // PATCH)


def window_index(grids, merge=MERGE, window=WINDOW, patch=PATCH):
    """Spec §3.3: (window_index over merged tokens, deduplicated cu_window_seqlens in patches)."""
    k = window // merge // patch
    unit = merge * merge
    index, cu = [], [0]
    base = 0
    for t, h, w in grids:
        hm, wm = h // merge, w // merge
        # The reference pads by k even when the side is already a multiple of k (spec §3.3 quirk);
        # the extra windows are empty and vanish in the de-duplication below.
        pad_h, pad_w = k - hm % k, k - wm % k
        nh, nw = (hm + pad_h) // k, (wm + pad_w) // k
        for f in range(t):
            for a in range(nh):
                for b in range(nw):
                    count = 0
                    for r in range(k):
                        for c in range(k):
                            y, x = a * k + r, b * k + c
                            if y < hm and x < wm:
                                index.append(base + f * hm * wm + y * wm + x)
                                count += 1
                    cu.append(cu[-1] + count * unit)
        base += t * hm * wm
    dedup = [cu[0]]
    for v in cu[1:]:
        if v != dedup[-1]:
            dedup.append(v)
    return index, dedup


def inverse_permutation(perm):
    inv = [0] * len(perm)
    for j, v in enumerate(perm):
        inv[v] = j
    return inv


def is_involution(perm):
    return all(perm[perm[j]] == j for j in range(len(perm)))


def is_identity(perm):
    return all(v == j for j, v in enumerate(perm))


def rope_index(input_ids, grids, image_token_id, merge=MERGE):
    """Spec §4.4 for images (no video, no padding): ([3][S] positions, rope_delta)."""
    planes = [[], [], []]
    nxt = 0
    i = 0
    grid_iter = iter(grids)
    seq = len(input_ids)
    while i < seq:
        if input_ids[i] != image_token_id:
            for p in planes:
                p.append(nxt)
            nxt += 1
            i += 1
            continue
        t, h, w = next(grid_iter)
        hm, wm = h // merge, w // merge
        count = t * hm * wm
        if input_ids[i:i + count] != [image_token_id] * count:
            raise ValueError("image block at %d shorter than its grid (%d tokens)" % (i, count))
        start = nxt
        for f in range(t):
            for r in range(hm):
                for c in range(wm):
                    planes[0].append(start + f)
                    planes[1].append(start + r)
                    planes[2].append(start + c)
        nxt = 1 + max(max(p[-count:]) for p in planes)
        i += count
    leftover = list(grid_iter)
    if leftover:
        raise ValueError("%d grids left without image tokens" % len(leftover))
    delta = (max(max(p) for p in planes) + 1 - seq) if seq else 0
    return planes, delta


def spec_5_2_ids(n_img):
    """The exact ids of spec §5.2: [user: image, "Describe this image."] + generation prompt."""
    return ([IM_START, 8948, 198, 2610, 525, 264, 10950, 17847, 13, IM_END, 198,
             IM_START, 872, 198, VISION_START] + [IMAGE_PAD] * n_img +
            [VISION_END, 74785, 419, 2168, 13, IM_END, 198, IM_START, 77091, 198])


def row_subset(n_rows, k, seed=1234):
    """Fixed pseudo-random sorted subset of row indices (all rows when n_rows <= k).

    random.Random with an integer seed is stable across Python 3 versions, so the subset can be
    recomputed anywhere from (n_rows, k, seed) alone.
    """
    if n_rows <= k:
        return list(range(n_rows))
    return sorted(random.Random(seed * 1000003 + n_rows).sample(range(n_rows), k))


def patchify(frames, grid, patch=PATCH, merge=MERGE, temporal=TEMPORAL):
    """Spec §2.4. frames: numpy float32 [T, 3, H, W] (T a multiple of `temporal`) -> [N, 1176]."""
    import numpy as np
    gt, gh, gw = grid
    x = frames.reshape(gt, temporal, 3, gh // merge, merge, patch, gw // merge, merge, patch)
    # axes: t tau c bh mh py bw mw px  ->  t bh bw mh mw | c tau py px
    x = x.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return np.ascontiguousarray(x.reshape(gt * gh * gw, 3 * temporal * patch * patch))


def unpatchify(rows, grid, patch=PATCH, merge=MERGE, temporal=TEMPORAL):
    """Inverse of patchify: [N, 1176] -> [T, 3, H, W]."""
    import numpy as np
    gt, gh, gw = grid
    x = rows.reshape(gt, gh // merge, gw // merge, merge, merge, 3, temporal, patch, patch)
    # axes: t bh bw mh mw c tau py px  ->  t tau c bh mh py bw mw px
    x = x.transpose(0, 6, 5, 1, 3, 7, 2, 4, 8)
    return np.ascontiguousarray(x.reshape(gt * temporal, 3, gh * patch, gw * patch))


def normalize_rgb8(rgb):
    """uint8 [H, W, 3] -> float32 [3, H, W], rescale then normalise (spec §2.2)."""
    import numpy as np
    x = rgb.astype(np.float32) * np.float32(1.0 / 255.0)
    mean = np.array(IMAGE_MEAN, dtype=np.float32)
    std = np.array(IMAGE_STD, dtype=np.float32)
    return ((x - mean) / std).transpose(2, 0, 1)


def denormalize_to_rgb8_float(chw):
    """float32 [3, H, W] normalised -> float64 [H, W, 3] in 0..255 units (not rounded)."""
    import numpy as np
    mean = np.array(IMAGE_MEAN, dtype=np.float64)[:, None, None]
    std = np.array(IMAGE_STD, dtype=np.float64)[:, None, None]
    return ((chw.astype(np.float64) * std + mean) * 255.0).transpose(1, 2, 0)
