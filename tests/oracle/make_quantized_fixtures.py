#!/usr/bin/env python3
"""transformers on the numpy-dequantized twins of the tiny checkpoint: the oracle of issue 16.

Two twins of tests/fixtures/parity/tiny-vocab512, each made here with numpy alone:
  mlx-g64   make_mlx_checkpoint.py --group-size 64 --dequantize-to: MLX's affine 4-bit format
            (what an mlx-community checkpoint holds), dequantized;
  vlmc-g64  make_quantized_twin.py --group-size 64: what `vlmc compile --quantize q4` makes of
            the same weights, dequantized.
transformers 5.17 runs each twin (float32, eager, CPU: dump_taps.py) on the parity cases
text_only and img336 (their input_ids.json; no vision block taps), writing
  tests/fixtures/parity_q4/<twin>/<case>/{input_ids.json, taps.safetensors, expected.json}
with the twin's recipe and the SHA-256 of its model.safetensors in expected.json ("twin"), so
that a test can check it rebuilt the same twin before comparing vlmc's quantized run with
these taps (tests/e2e/quantized_oracle.sh: ctest e2e.quantized_oracle).

Usage (repository root, where transformers is installed):
  python3 tests/oracle/make_quantized_fixtures.py
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle_common as oc  # noqa: E402

CKPT = os.path.join("tests", "fixtures", "parity", "tiny-vocab512")
OUT = os.path.join("tests", "fixtures", "parity_q4")
CASES = ("text_only", "img336")
TWINS = {
    "mlx-g64": ["tests/oracle/make_mlx_checkpoint.py", CKPT, "{tmp}/mlx", "--group-size", "64",
                "--dequantize-to", "{twin}"],
    "vlmc-g64": ["tests/oracle/make_quantized_twin.py", CKPT, "{twin}", "--group-size", "64"],
}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make_twin(name, tmp):
    twin = os.path.join(tmp, name + "-twin")
    argv = [a.format(tmp=os.path.join(tmp, name), twin=twin) for a in TWINS[name]]
    out = subprocess.run([sys.executable] + argv, capture_output=True, text=True)
    print(out.stdout.strip())
    if out.returncode != 0:
        sys.exit("make_quantized_fixtures: %s failed:\n%s" % (" ".join(argv), out.stderr))
    return twin, {"recipe": " ".join(TWINS[name]).replace("{tmp}/mlx", "MLX_DIR")
                  .replace("{twin}", "TWIN_DIR"),
                  "model_safetensors_sha256": sha256(os.path.join(twin, "model.safetensors"))}


def main():
    os.chdir(oc.REPO_ROOT)
    import dump_taps as dt
    failures = []
    tmp = tempfile.mkdtemp(prefix="vlmc-q4-twins-")
    try:
        for name in TWINS:
            twin, about = make_twin(name, tmp)
            model = dt.load_model(twin)
            for case in CASES:
                src = os.path.join("tests", "fixtures", "parity", case)
                with open(os.path.join(src, "expected.json")) as f:
                    images = json.load(f).get("images", [])
                case_dir = os.path.join(OUT, name, case)
                os.makedirs(case_dir, exist_ok=True)
                ids = os.path.join(case_dir, "input_ids.json")
                shutil.copyfile(os.path.join(src, "input_ids.json"), ids)
                args = types.SimpleNamespace(
                    ckpt=twin, image=images, prompt=None, input_ids=ids, out=case_dir,
                    max_new_tokens=16, pixel_rows=64 if images else 0, no_block_taps=True,
                    save_resized=False, device="cpu")
                inputs, how, pil_images = dt.build_inputs(model, args)
                expected, _ = dt.dump(model, args, inputs, how, pil_images)
                expected["checkpoint"] = CKPT + " (its " + name + " twin)"
                expected["twin"] = about
                with open(os.path.join(case_dir, "expected.json"), "w") as f:
                    json.dump(expected, f, indent=1)
                    f.write("\n")
                bad = [k for k, v in expected["checks"].items() if v is False]
                if bad:
                    failures.append("%s %s: checks failed: %s" % (name, case, bad))
                print("%s %s: greedy %s" % (name, case, expected["greedy_tokens"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("parity_q4: failures %s" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
