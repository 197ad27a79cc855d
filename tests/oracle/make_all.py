#!/usr/bin/env python3
"""Runs every device-side fixture step in one process (transformers is imported once).

Steps: tokenizer + chat cases, preprocessing, tiny checkpoint + parity taps + wrong inverse, and
a smoke test of dump_taps.py's -p path on a vocab-151936 tiny variant (spec §5.2 prompt).
Each step's failure is reported and the others still run. Writes SUMMARY_PATH (JSON).

Usage: python3 tests/oracle/make_all.py [SUMMARY_PATH]
"""

import json
import os
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle_common as oc  # noqa: E402


def step(summary, name, fn):
    t0 = time.time()
    print("=== %s" % name, flush=True)
    try:
        summary[name] = {"result": fn()}
    except Exception as e:
        traceback.print_exc()
        summary[name] = {"error": repr(e)}
    summary[name]["seconds"] = round(time.time() - t0, 1)
    print("=== %s done in %.1f s" % (name, summary[name]["seconds"]), flush=True)


def smoke_prompt_path():
    """dump_taps.py -p on a tiny model with the real vocabulary, tokenizer and template."""
    import dump_taps as dt
    import make_tiny_checkpoint as mtc
    ckpt = tempfile.mkdtemp(prefix="tiny151936-")
    mtc.build(ckpt, vocab=151936)
    out = tempfile.mkdtemp(prefix="smoke-")
    dt.main([ckpt, "--image", os.path.join(oc.FIXTURES_DIR, "test_image_shapes.png"),
             "-p", "Describe this image.", "-o", out, "-n", "4", "--no-block-taps",
             "--skip-no-cache-check"])
    with open(os.path.join(out, "expected.json")) as f:
        expected = json.load(f)
    ok = expected["input_ids"] == oc.spec_5_2_ids(256)
    print("smoke: %d ids, spec 5.2 match %s, tokens %s, text %r, checks %s"
          % (len(expected["input_ids"]), ok, expected["greedy_tokens"],
             expected.get("greedy_text"), expected["checks"]))
    return {"ids": len(expected["input_ids"]), "spec_5_2_match": ok,
            "checks": expected["checks"], "rope_delta": expected["rope_delta"]}


def main(argv):
    summary_path = argv[1] if len(argv) > 1 else os.path.join(tempfile.gettempdir(),
                                                              "oracle_summary.json")
    os.chdir(oc.REPO_ROOT)
    import torch
    import transformers
    torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))
    summary = {"transformers": transformers.__version__, "torch": torch.__version__}
    print("transformers %s torch %s threads %d" % (transformers.__version__, torch.__version__,
                                                   torch.get_num_threads()), flush=True)
    import make_parity_fixtures
    import make_preprocess_fixtures
    import make_tokenizer_fixtures
    step(summary, "tokenizer", lambda: make_tokenizer_fixtures.main(["x"]))
    step(summary, "preprocess", lambda: make_preprocess_fixtures.main(["x"]))
    step(summary, "parity", lambda: make_parity_fixtures.main([]))
    step(summary, "smoke_prompt_path", smoke_prompt_path)
    with open(summary_path, "w") as f:
        json.dump(summary, f, indent=1, ensure_ascii=False, default=str)
    print(json.dumps(summary, ensure_ascii=False, default=str)[:6000])
    failed = [k for k, v in summary.items() if isinstance(v, dict) and "error" in v]
    print("FAILED STEPS: %s" % failed if failed else "ALL STEPS RAN")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
