#!/usr/bin/env python3
"""The shapes model end to end, as a user runs it (issue 6, acceptance 3).

Compiles assets/shapes-vl with `vlmc compile`, runs `vlmc-run` (greedy) on the bug report's image
(tests/fixtures/test_image_shapes.png, 448x448), on the committed 336x336 and 448x672 scenes
(tests/fixtures/shapes_scenes/) and on one 672x448 held-out scene, and asserts that each answer
names exactly the image's (colour, shape) pairs (training/scenes.py's parser: every expected
pair, each once, nothing else). Whether the text is also transformers' answer, word for word,
is printed, not asserted (training/compare_vlmc.py measures that on 200 scenes).

Then it plants the defect of ../shared/background/qwen2_5_vl_dropped_object.md: in the program
after the whole pipeline (--dump-dir), the final un-permute `gather %image_embeds,
%window_inverse` becomes `gather %image_embeds, %window_order`, compiled back with --program. It
runs that artifact on the images whose window order is not an involution (elsewhere order and
inverse are the same permutation). The test passes only if the correct artifact passes and the
planted defect is caught on at least one image, by either check:
  - text: the answer no longer names exactly the expected pairs;
  - stage taps: `image_embeds` must be the `merger` rows (window order) gathered by the inverse of
    the window order, which tests/oracle/oracle_common.py computes independently of vlmc (the
    spec's get_window_index). Exact, whatever the numerics of the backend.
Both are printed per image. The text check alone does not catch this defect with the committed
checkpoint: its answers hardly depend on where the image tokens sit (the vision tower's features
already carry the layout), so the defect's answers equal transformers' on all 124 held-out scenes
whose order is not an involution (training/results/vlmc_planted_defect.json).

  usage: shapes.py VLMC VLMC_RUN        (from the repository root; Debian's python3)
"""

import concurrent.futures
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "training"))
sys.path.insert(0, os.path.join(REPO, "tests", "oracle"))
import oracle_common  # noqa: E402
import scenes  # noqa: E402

MODEL = os.path.join(REPO, "assets", "shapes-vl")
TEST_IMAGE = os.path.join(REPO, "tests", "fixtures", "test_image_shapes.png")
SCENES_DIR = os.path.join(REPO, "tests", "fixtures", "shapes_scenes")
STAGE3_RESULT = os.path.join(REPO, "training", "results", "stage3_result.json")
# The bug report's drawing (tests/fixtures/generate_test_image_shapes.py), left to right by the
# centre of each bounding box: square x 40-200, triangle x 90-370, circle x 250-410.
TEST_IMAGE_PAIRS = [("red", "square"), ("green", "triangle"), ("blue", "circle")]
FIXTURE_SIZES = ("336x336", "448x672")
# The fixtures' 448x672 is width x height: a merged grid 16 wide, whose window order is an
# involution, so the defect cannot show there. The bug report's 448x672 (352 of 384 tokens
# misplaced) is height x width; held-out scene 21 of the evaluation stream is one (672 wide, 448
# high, four shapes; transformers named them exactly), drawn here by scenes.py.
HELDOUT_WIDE_INDEX = 21
MAX_NEW_TOKENS = 48
PLANT_FROM = "gather %image_embeds, %window_inverse "
PLANT_TO = "gather %image_embeds, %window_order "


class Failure(Exception):
    pass


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise Failure(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    return proc.stdout


def heldout_case(index, work, transformers_eval):
    scene = scenes.make_scene(scenes.EVAL_SEED, index)
    path = os.path.join(work, f"heldout_{index:03d}.png")
    scenes.save_png(scenes.render(scene), path)
    records = {r["index"]: r for r in transformers_eval["heldout"]["records"]}
    return (f"held-out scene {index} {scene['width']}x{scene['height']}", path,
            scenes.pairs(scene), (scene["width"], scene["height"]), records[index]["answer"])


def cases(work):
    """(label, image path, expected pairs left to right, (width, height), transformers' text)."""
    with open(STAGE3_RESULT) as f:
        transformers_eval = json.load(f)["eval_f32"]
    out = [("test_image_shapes 448x448", TEST_IMAGE, TEST_IMAGE_PAIRS, (448, 448),
            transformers_eval["test_image"]["answer"])]
    with open(os.path.join(SCENES_DIR, "expected.json")) as f:
        fixtures = json.load(f)["images"]
    for entry in fixtures:
        size = f"{entry['width']}x{entry['height']}"
        if size in FIXTURE_SIZES:
            out.append((f"{entry['file'][:-4]}", os.path.join(SCENES_DIR, entry["file"]),
                        [tuple(p) for p in entry["pairs"]], (entry["width"], entry["height"]),
                        entry["transformers_answer"]))
    found = {f"{c[3][0]}x{c[3][1]}" for c in out}
    missing = [s for s in FIXTURE_SIZES if s not in found]
    if missing:
        raise Failure(f"{SCENES_DIR}/expected.json has no scene of size {', '.join(missing)}")
    return out + [heldout_case(HELDOUT_WIDE_INDEX, work, transformers_eval)]


def window_order(size):
    """The spec's window order of the merged tokens for an image of (width, height)."""
    _, grid_h, grid_w = oracle_common.image_grid(size[1], size[0])
    order, _ = oracle_common.window_index([(1, grid_h, grid_w)])
    return order


def is_involution(size):
    return oracle_common.is_involution(window_order(size))


def compile_artifacts(vlmc, work):
    """The correct artifact and the planted-defect one, both from assets/shapes-vl."""
    good = os.path.join(work, "good.vlmc")
    dump = os.path.join(work, "dump")
    run([vlmc, "compile", MODEL, "-o", good, "--dump-dir", dump])
    last = os.path.join(dump, sorted(n for n in os.listdir(dump) if n.endswith(".vir"))[-1])
    with open(last) as f:
        program = f.read()
    if program.count(PLANT_FROM) != 1:
        raise Failure(f"{last}: expected one '{PLANT_FROM.strip()}' to plant the defect in, "
                      f"found {program.count(PLANT_FROM)}")
    wrong_program = os.path.join(work, "wrong.vir")
    with open(wrong_program, "w") as f:
        f.write(program.replace(PLANT_FROM, PLANT_TO))
    wrong = os.path.join(work, "wrong.vlmc")
    run([vlmc, "compile", MODEL, "--program", wrong_program, "-o", wrong])
    return good, wrong


def read_taps(path, names):
    """The named f32 tensors of a safetensors file, as numpy arrays."""
    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_len])
    out = {}
    for name in names:
        if name not in header:
            raise Failure(f"{path}: no tap '{name}'")
        info = header[name]
        if info["dtype"] != "F32":
            raise Failure(f"{path}: tap '{name}' is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        data = np.frombuffer(blob[8 + header_len + begin:8 + header_len + end], dtype="<f4")
        out[name] = data.reshape(info["shape"])
    return out


def unpermute_ok(taps_dir, size):
    """True when image_embeds == merger[inverse(window order)] exactly (see the docstring)."""
    taps = read_taps(os.path.join(taps_dir, "taps.safetensors"), ("merger", "image_embeds"))
    inverse = oracle_common.inverse_permutation(window_order(size))
    merger, embeds = taps["merger"], taps["image_embeds"]
    if merger.shape != embeds.shape or merger.shape[0] != len(inverse):
        raise Failure(f"{taps_dir}: merger {merger.shape}, image_embeds {embeds.shape}, "
                      f"{len(inverse)} merged tokens expected")
    return bool(np.array_equal(embeds, merger[inverse]))


def answer(vlmc_run, artifact, case, taps_dir):
    _, image, pairs, size, _ = case
    text = run([vlmc_run, artifact, "--image", image, "-p", scenes.Q_DESCRIBE,
                "-n", str(MAX_NEW_TOKENS), "--dump-taps", taps_dir]).strip()
    return {"text": text, "text_ok": scenes.exact_set(text, pairs),
            "taps_ok": unpermute_ok(taps_dir, size)}


def run_all(vlmc_run, artifact, todo, work, tag):
    """Answers for every case, two vlmc-run processes at a time (the machine has two cores)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(answer, vlmc_run, artifact, case,
                               os.path.join(work, f"taps-{tag}-{k}"))
                   for k, case in enumerate(todo)]
        return [f.result() for f in futures]


def describe(case, got):
    want = ", ".join(f"{c} {s}" for c, s in case[2])
    return f"{case[0]}: {got['text']!r} (expected {want})"


def check_correct(vlmc_run, good, todo, work):
    failed = 0
    for case, got in zip(todo, run_all(vlmc_run, good, todo, work, "good")):
        ok = got["text_ok"] and got["taps_ok"]
        failed += not ok
        taps = "" if got["taps_ok"] else "; image_embeds is not merger at the inverse order"
        same = ("same text as transformers" if got["text"] == case[4]
                else f"transformers: {case[4]!r}")
        print(f"{'ok  ' if ok else 'FAIL'} correct artifact, {describe(case, got)}{taps} [{same}]")
    return failed


def check_defect(vlmc_run, wrong, todo, work):
    """Runs the planted-defect artifact where it can show; returns how many images caught it."""
    sensitive = [c for c in todo if not is_involution(c[3])]
    if not sensitive:
        raise Failure("no image whose window order is not an involution: the defect cannot show")
    caught_text = caught_taps = 0
    for case, got in zip(sensitive, run_all(vlmc_run, wrong, sensitive, work, "wrong")):
        caught_text += not got["text_ok"]
        caught_taps += not got["taps_ok"]
        print(f"     planted defect, {describe(case, got)}: text "
              f"{'CAUGHT' if not got['text_ok'] else 'still right'}, taps "
              f"{'CAUGHT' if not got['taps_ok'] else 'still right'}")
    involutions = [c[0] for c in todo if is_involution(c[3])]
    print(f"     planted defect: caught by the text on {caught_text}/{len(sensitive)} and by the "
          f"taps on {caught_taps}/{len(sensitive)} images whose window order is not an "
          f"involution; not run on {', '.join(involutions)} (involutions: order == inverse)")
    return caught_text + caught_taps


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    vlmc, vlmc_run = argv[1], argv[2]
    try:
        with tempfile.TemporaryDirectory(prefix="vlmc-shapes-e2e-") as work:
            todo = cases(work)
            good, wrong = compile_artifacts(vlmc, work)
            failed = check_correct(vlmc_run, good, todo, work)
            caught = check_defect(vlmc_run, wrong, todo, work)
    except (Failure, OSError) as e:
        print(f"FAIL {e}")
        return 1
    if caught == 0:
        print("FAIL the planted defect (order used as inverse) went unnoticed on every image")
        failed += 1
    print(f"shapes e2e: {len(todo)} images, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
