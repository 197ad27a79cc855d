#!/usr/bin/env python3
"""Checks oracle_common.py against the worked examples of the spec (runs without torch).

Usage: python3 tests/oracle/selftest.py   (exit status 0 when every check passes)
"""

import importlib.util
import sys

import oracle_common as oc

FAILURES = []


def check(name, got, want):
    if got != want:
        FAILURES.append(name)
        print("FAIL %s\n  got  %r\n  want %r" % (name, got, want))
    else:
        print("ok   %s" % name)


def test_smart_resize():
    # Spec §2.1, (h, w) -> (h', w').
    cases = {(224, 224): (224, 224), (70, 70): (56, 56), (42, 42): (56, 56),
             (484, 1024): (476, 1036), (1800, 1350): (1792, 1344), (480, 640): (476, 644),
             (1080, 1920): (1092, 1932), (4000, 3000): (4004, 2996), (20, 20): (56, 56),
             (10, 2000): (28, 812), (40, 40): (56, 56)}
    for (h, w), want in cases.items():
        check("smart_resize %dx%d" % (h, w), oc.smart_resize(h, w), want)


def test_window_index():
    idx, cu = oc.window_index([(1, 12, 20)])
    want = ([0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33,
             4, 5, 6, 7, 14, 15, 16, 17, 24, 25, 26, 27, 34, 35, 36, 37,
             8, 9, 18, 19, 28, 29, 38, 39,
             40, 41, 42, 43, 50, 51, 52, 53, 44, 45, 46, 47, 54, 55, 56, 57, 48, 49, 58, 59])
    check("window_index 1x12x20", idx, want)
    check("cu 1x12x20", cu, [0, 64, 128, 160, 192, 224, 240])
    check("cu 1x16x16", oc.window_index([(1, 16, 16)])[1], [0, 64, 128, 192, 256])
    check("cu two images", oc.window_index([(1, 12, 20), (1, 8, 8)])[1],
          [0, 64, 128, 160, 192, 224, 240, 304])
    check("cu video 2x8x12", oc.window_index([(2, 8, 12)])[1], [0, 64, 96, 160, 192])
    # Spec §3.9: which grids hide the wrong inverse.
    check("involution 1x32x32", oc.is_involution(oc.window_index([(1, 32, 32)])[0]), True)
    check("identity 1x32x32", oc.is_identity(oc.window_index([(1, 32, 32)])[0]), False)
    check("involution 1x24x24", oc.is_involution(oc.window_index([(1, 24, 24)])[0]), False)
    check("involution 1x16x16", oc.is_involution(oc.window_index([(1, 16, 16)])[0]), False)
    check("identity W'<=4", oc.is_identity(oc.window_index([(1, 40, 8)])[0]), True)
    for hm in range(1, 41):
        for wm in range(1, 41):
            perm = oc.window_index([(1, 2 * hm, 2 * wm)])[0]
            ident = oc.is_identity(perm)
            if ident != (wm <= 4 or hm == 1):
                check("identity rule %dx%d" % (hm, wm), ident, not ident)
            inv = oc.is_involution(perm) and not ident
            want_inv = not ident and ((wm == 16 and hm % 4 in (0, 1)) or
                                      (hm, wm) in ((2, 8), (3, 12)))
            if inv != want_inv:
                check("involution rule %dx%d" % (hm, wm), inv, want_inv)
    check("inverse [2,0,1]", oc.inverse_permutation([2, 0, 1]), [1, 2, 0])


def test_rope_index():
    ids = [1] * 15 + [oc.IMAGE_PAD] * 256 + [1] * 10
    planes, delta = oc.rope_index(ids, [(1, 32, 32)], oc.IMAGE_PAD)
    check("rope delta 281", delta, -240)
    check("rope image T", planes[0][15:271], [15] * 256)
    check("rope image H", planes[1][15:271:16], list(range(15, 31)))
    check("rope image W", planes[2][15:31], list(range(15, 31)))
    check("rope tail", planes[0][271:], list(range(31, 41)))
    # Two-image example of §4.4.
    ids = ([1] * 3 + [oc.IMAGE_PAD] * 64 + [1] * 3 + [oc.IMAGE_PAD] * 60 + [1] * 3)
    planes, delta = oc.rope_index(ids, [(1, 16, 16), (1, 12, 20)], oc.IMAGE_PAD)
    check("rope two images delta", delta, -106)
    check("rope second image start", (planes[0][70], planes[1][70], planes[2][70]), (14, 14, 14))
    check("rope second image end", (planes[1][129], planes[2][129]), (19, 23))
    check("rope tail two", planes[0][130:], [24, 25, 26])
    check("spec 5.2 length", len(oc.spec_5_2_ids(256)), 281)


def test_patchify_roundtrip():
    import numpy as np
    rng = np.random.RandomState(0)
    frames = rng.rand(2, 3, 56, 84).astype(np.float32)
    rows = oc.patchify(frames, (1, 4, 6))
    check("patchify shape", rows.shape, (24, 1176))
    # Spec §2.4: row r=(((t*bh_n+bh)*bw_n+bw)*m+mh)*m+mw, f=((c*T+tau)*P+py)*P+px.
    bh, bw, mh, mw, c, tau, py, px = 1, 2, 1, 0, 2, 1, 5, 9
    r = ((bh * 3 + bw) * 2 + mh) * 2 + mw
    f = ((c * 2 + tau) * 14 + py) * 14 + px
    y, x = (bh * 2 + mh) * 14 + py, (bw * 2 + mw) * 14 + px
    check("patchify element", float(rows[r, f]), float(frames[tau, c, y, x]))
    check("unpatchify roundtrip", bool((oc.unpatchify(rows, (1, 4, 6)) == frames).all()), True)


def test_row_subset():
    a = oc.row_subset(15336, 64)
    check("row_subset size", len(a), 64)
    check("row_subset sorted unique", a == sorted(set(a)), True)
    check("row_subset stable", a == oc.row_subset(15336, 64), True)
    check("row_subset small", oc.row_subset(10, 64), list(range(10)))


def main():
    test_smart_resize()
    test_window_index()
    test_rope_index()
    if importlib.util.find_spec("numpy") is not None:
        test_patchify_roundtrip()
    else:
        print("skip patchify (no numpy)")
    test_row_subset()
    print("%d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
