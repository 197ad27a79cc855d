#!/usr/bin/env python3
"""transformers' default generate() under a checkpoint's generation_config.json: the oracle of
issue 20's "generation as transformers does it".

For each generation config below and each parity case (text_only, img336: their
input_ids.json and images), the tiny checkpoint (tests/fixtures/parity/tiny-vocab512) runs
model.generate(**inputs) with the config as the model's generation_config and nothing else
passed but max_new_tokens: what a user of transformers gets by default. Written to
  tests/fixtures/parity_generation/<config>/<case>/expected.json
with the config as generation_config.json holds it, the generated ids, and the plain greedy
ids of the same prompt (generation rules off, as dump_taps.py's greedy_generate) so that a test
can tell that the config changed the answer. The configs:
  qwen25vl3b  Qwen2.5-VL-3B-Instruct's own: do_sample with top_k 1 (so deterministic),
              temperature 0.1, top_p 0.001, repetition_penalty 1.05;
  penalty13   do_sample false, repetition_penalty 1.3 (greedy under a strong penalty, which
              the tiny random model's repetitive answers make visible).
vlmc's check: compile the checkpoint with the config as its generation_config.json, run
vlmc-run with no sampling flag on the same input ids and images, compare the ids.

Usage (repository root, where transformers 5.17 is installed):
  python3 tests/oracle/make_generation_fixtures.py
"""

import copy
import json
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dump_taps  # noqa: E402

CKPT = os.path.join("tests", "fixtures", "parity", "tiny-vocab512")
PARITY = os.path.join("tests", "fixtures", "parity")
OUT = os.path.join("tests", "fixtures", "parity_generation")
CASES = ("text_only", "img336")
NEW_TOKENS = 16
CONFIGS = {
    "qwen25vl3b": {"do_sample": True, "temperature": 0.1, "top_k": 1, "top_p": 0.001,
                   "repetition_penalty": 1.05},
    "penalty13": {"do_sample": False, "repetition_penalty": 1.3},
}


def case_inputs(model, case):
    expected = json.load(open(os.path.join(PARITY, case, "expected.json")))
    args = types.SimpleNamespace(ckpt=CKPT, image=expected.get("images", []), prompt=None,
                                 input_ids=os.path.join(PARITY, case, "input_ids.json"))
    inputs, _, _ = dump_taps.build_inputs(model, args)
    return inputs, args.image


def default_generate(model, inputs, fields):
    """model.generate() with `fields` over the checkpoint's own generation config (its eos ids
    kept), as the model would load them from generation_config.json."""
    import torch
    saved = model.generation_config
    cfg = copy.deepcopy(saved)
    for key, value in fields.items():
        setattr(cfg, key, value)
    if cfg.pad_token_id is None:
        cfg.pad_token_id = 0
    model.generation_config = cfg
    dump_taps.reset_rope_state(model)
    try:
        torch.manual_seed(0)
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=NEW_TOKENS)
    finally:
        model.generation_config = saved
    return out[0, inputs["input_ids"].shape[1]:].tolist()


def main():
    import transformers
    model = dump_taps.load_model(CKPT)
    base = json.load(open(os.path.join(CKPT, "generation_config.json")))
    for name, fields in CONFIGS.items():
        for case in CASES:
            inputs, images = case_inputs(model, case)
            tokens = default_generate(model, inputs, fields)
            greedy, _ = dump_taps.greedy_generate(model, inputs, NEW_TOKENS)
            out_dir = os.path.join(OUT, name, case)
            os.makedirs(out_dir, exist_ok=True)
            record = {
                "checkpoint": CKPT,
                "generation_config": dict(base, **fields),
                "input_ids_file": os.path.join(PARITY, case, "input_ids.json"),
                "images": images,
                "max_new_tokens": NEW_TOKENS,
                "generated": tokens,
                "greedy_without_rules": greedy,
                "transformers": transformers.__version__,
            }
            with open(os.path.join(out_dir, "expected.json"), "w") as f:
                json.dump(record, f, indent=1)
            print("%s/%s: %s%s" % (name, case, tokens,
                                   "" if tokens != greedy else " (same as plain greedy)"))


if __name__ == "__main__":
    main()
