#!/usr/bin/env python3
"""Train the tiny Qwen2.5-VL of assets/shapes-vl on generated shape scenes (issue 6).

Needs torch and transformers 5.x on a CUDA machine (recipe measured on one H200, torch 2.11,
transformers 5.17). One command is limited to 10 minutes there, so training runs in stages: each
call trains until its time budget is nearly spent, saves a resumable state on local disk, exports
the bf16 checkpoint and evaluates it. See training/README.md for the exact commands.

Data: batch b holds scenes b*B .. b*B+B-1 of the training stream (scenes.TRAIN_SEED), all drawn
at the image size scenes.batch_image_size(seed, b); DataLoader workers draw them and run the real
Qwen2_5_VLProcessor, so training sees exactly the inference preprocessing. The loss covers only
the answer tokens and the closing <|im_end|>.

Speed: the stock vision attention (without flash-attn) loops over every window of every image.
During training each vision attention module is swapped for an equivalent batched one: every image
of a batch has the same size, hence the same window layout, so one block-diagonal mask serves all
of them in a single scaled_dot_product_attention call. The swap is checked against the stock
module at start-up and is never saved: evaluation loads the exported checkpoint with stock code.
"""

import argparse
import copy
import json
import math
import os
import shutil
import sys
import tempfile
import time
import types

import numpy as np

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
import torch  # noqa: E402
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import evaluate  # noqa: E402
import scenes  # noqa: E402

T_START = time.time()
IM_END = "<|im_end|>"


def log(msg):
    print(f"[{time.time() - T_START:7.1f}s] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# Data


def make_batch(processor, prompts, seed, batch_index, batch_size, size=None):
    """Processor outputs plus `labels` for training batch `batch_index` (a pure function of it)."""
    from PIL import Image
    size = size or scenes.batch_image_size(seed, batch_index)
    texts, images, answers = [], [], []
    for j in range(batch_size):
        index = batch_index * batch_size + j
        scene = scenes.make_scene(seed, index, size=size)
        question = scenes.pick_question(seed, index)
        answer = scenes.answer(scene, question) + IM_END
        texts.append(prompts[question] + answer)
        answers.append(answer)
        images.append(Image.fromarray(scenes.render(scene), "RGB"))
    enc = processor(text=texts, images=images, padding=True, return_tensors="pt")
    batch = {k: v for k, v in enc.items()}
    ids, mask = batch["input_ids"], batch["attention_mask"]
    labels = torch.full_like(ids, -100)
    for row, answer in enumerate(answers):
        answer_ids = processor.tokenizer(answer, add_special_tokens=False)["input_ids"]
        n = int(mask[row].sum())
        end_ids = ids[row, n - len(answer_ids):n].tolist()
        if not bool(mask[row, :n].all()) or end_ids != answer_ids:
            raise RuntimeError(f"answer tokens not at the end of row {row}: {end_ids} vs "
                               f"{answer_ids} ({answer!r})")
        labels[row, n - len(answer_ids):n] = torch.tensor(answer_ids)
    batch["labels"] = labels
    batch["pixel_values"] = _drop_temporal_copy(batch["pixel_values"])
    return batch


def _drop_temporal_copy(pixel_values):
    """A still image is two identical frames (spec 2.3): keep one to halve what workers ship.

    Rows are [C, T, P, P] flattened; restore_temporal_copy() rebuilds them exactly on the GPU.
    """
    pv = pixel_values.reshape(pixel_values.shape[0], 3, 2, -1)
    if not torch.equal(pv[:, :, 0], pv[:, :, 1]):
        raise RuntimeError("pixel_values frames differ; not a still image")
    return pv[:, :, 0].reshape(pixel_values.shape[0], -1).contiguous()


def restore_temporal_copy(half):
    n, per_channel = half.shape[0], half.shape[1] // 3
    return half.reshape(n, 3, 1, per_channel).expand(n, 3, 2, per_channel).reshape(n, -1)


class TrainBatches(torch.utils.data.Dataset):
    def __init__(self, processor, prompts, seed, batch_size, n_batches):
        self.processor, self.prompts = processor, prompts
        self.seed, self.batch_size, self.n_batches = seed, batch_size, n_batches

    def __len__(self):
        return self.n_batches

    def __getitem__(self, batch_index):
        return make_batch(self.processor, self.prompts, self.seed, batch_index, self.batch_size)


def _worker_init(_):
    torch.set_num_threads(1)


def make_loader(dataset, first_batch, last_batch, workers):
    # Batches travel through /dev/shm: keep what is in flight well under its free space
    # (the largest batch, 448x672, is about batch_size * 1536 * 588 * 4 bytes).
    batch_bytes = dataset.batch_size * 1536 * 588 * 4
    shm_free = shutil.disk_usage("/dev/shm").free if os.path.isdir("/dev/shm") else 0
    prefetch = max(1, min(4, int(shm_free * 0.4 // (batch_bytes * max(1, workers)))))
    if shm_free * 0.4 < batch_bytes * workers:
        workers = max(1, int(shm_free * 0.4 // batch_bytes))
    log(f"loader: {workers} workers, prefetch {prefetch}, /dev/shm free {shm_free / 2**30:.1f} GiB")
    return torch.utils.data.DataLoader(
        dataset, batch_size=None, sampler=range(first_batch, last_batch), num_workers=workers,
        pin_memory=True, prefetch_factor=prefetch, worker_init_fn=_worker_init,
        persistent_workers=False)


def used_token_ids(processor, prompts, seed, n_scenes=600):
    """Ids that occur in training texts (prompts with one image pad, answers, specials)."""
    ids = set(range(151643, 151657))
    tok = processor.tokenizer
    for prompt in prompts.values():
        ids.update(tok(prompt, add_special_tokens=False)["input_ids"])
    for index in range(n_scenes):
        scene = scenes.make_scene(seed, index)
        for q in scenes.QUESTIONS:
            ids.update(tok(scenes.answer(scene, q) + IM_END, add_special_tokens=False)["input_ids"])
    return sorted(ids)


# ---------------------------------------------------------------------------------------------
# Model


def build_model(model_dir, seed, used_ids):
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    config = Qwen2_5_VLConfig.from_pretrained(model_dir)
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration._from_config(config, attn_implementation="sdpa")
    model = model.float()
    emb = model.get_input_embeddings().weight
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed + 1)
        # Rows the task never uses start tiny: their logits start near zero and the tied head
        # only has to push them down.
        init = torch.randn(emb.shape, generator=g) * 0.002
        idx = torch.tensor(used_ids)
        init[idx] = torch.randn(len(used_ids), emb.shape[1], generator=g) * 0.02
        emb.copy_(init)
    if model.lm_head.weight.data_ptr() != emb.data_ptr():
        raise RuntimeError("lm_head is not tied to embed_tokens")
    return model


def vision_tower(model):
    inner = getattr(model, "model", model)
    return inner.visual if hasattr(inner, "visual") else model.visual


class FastAttention:
    """Switch, per-batch image count and call counter for the batched vision attention."""
    enabled = True
    num_images = 1
    calls = 0


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _fast_vision_attention(self, hidden_states, cu_seqlens, rotary_pos_emb=None,
                           position_embeddings=None, **kwargs):
    seq = hidden_states.shape[0]
    b = FastAttention.num_images
    if not FastAttention.enabled or position_embeddings is None or seq % b != 0:
        return self._stock_forward(hidden_states, cu_seqlens, rotary_pos_emb=rotary_pos_emb,
                                   position_embeddings=position_embeddings, **kwargs)
    FastAttention.calls += 1
    n = seq // b
    qkv = self.qkv(hidden_states).reshape(seq, 3, self.num_heads, -1)
    q, k, v = qkv.permute(1, 0, 2, 3).unbind(0)
    cos, sin = position_embeddings
    cos, sin = cos.unsqueeze(-2).float(), sin.unsqueeze(-2).float()
    q = (q.float() * cos + _rotate_half(q.float()) * sin).to(v.dtype)
    k = (k.float() * cos + _rotate_half(k.float()) * sin).to(v.dtype)
    # [seq, heads, d] -> [images, heads, n, d]; images are contiguous in window order.
    q, k, v = (t.reshape(b, n, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))
    mask = None
    if cu_seqlens.numel() != b + 1:
        # Windowed block: same window layout in every image, so image 0's segments serve all.
        pos = torch.arange(n, device=hidden_states.device, dtype=cu_seqlens.dtype)
        seg = torch.searchsorted(cu_seqlens.contiguous(), pos, right=True)
        mask = (seg[:, None] == seg[None, :])[None, None]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scaling)
    out = out.transpose(1, 2).reshape(seq, -1)
    return self.proj(out)


def install_fast_paths(model):
    for block in vision_tower(model).blocks:
        attn = block.attn
        attn._stock_forward = attn.forward
        attn.forward = types.MethodType(_fast_vision_attention, attn)


def to_device(batch, device):
    out = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    out["pixel_values"] = restore_temporal_copy(out["pixel_values"])
    return out


def compute_loss(model, batch):
    """Mean cross-entropy over answer tokens; the head runs only at those positions."""
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    labels = batch["labels"]
    FastAttention.num_images = int(inputs["image_grid_thw"].shape[0])
    hidden = model.model(**inputs, use_cache=False).last_hidden_state
    target = labels[:, 1:]
    keep = target != -100
    logits = model.lm_head(hidden[:, :-1][keep])
    return F.cross_entropy(logits.float(), target[keep])


# ---------------------------------------------------------------------------------------------
# Optimiser, schedule, state


def make_optimizer(model, lr, weight_decay):
    emb = model.get_input_embeddings().weight
    decay, no_decay = [], []
    for p in model.parameters():
        if p is emb or p.ndim < 2:
            no_decay.append(p)
        else:
            decay.append(p)
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8,
                             fused=torch.cuda.is_available())


# The schedule's length is fitted to the time budget from the speed between these stage steps.
RATE_FROM, RATE_TO = 120, 320


def lr_at(step_in_stage, stage_steps, peak, warmup, min_frac):
    if step_in_stage < warmup:
        return peak * (step_in_stage + 1) / warmup
    t = min(1.0, (step_in_stage - warmup) / max(1, stage_steps - warmup))
    return peak * (min_frac + (1 - min_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def save_state(path, model, opt, info):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "info": info}, tmp)
    os.replace(tmp, path)


def export_bf16(model, out_dir):
    """The HF checkpoint (config.json, model.safetensors in bf16, our generation_config.json)."""
    from transformers import Qwen2_5_VLForConditionalGeneration
    export = Qwen2_5_VLForConditionalGeneration._from_config(model.config)
    missing, unexpected = export.load_state_dict(model.state_dict(), strict=False)
    if unexpected or [m for m in missing if not m.startswith("lm_head")]:
        raise RuntimeError(f"export: missing {missing}, unexpected {unexpected}")
    export = export.to(torch.bfloat16)
    export.save_pretrained(out_dir, max_shard_size="1GB")
    shutil.copyfile(os.path.join(evaluate.ASSET_DIR, "generation_config.json"),
                    os.path.join(out_dir, "generation_config.json"))
    return out_dir


def train_loop(model, opt, batches, device, args, info, step, state_path, train_end):
    """Train on `batches` until train_end or the end of the stage's schedule; returns the step.

    info holds stage_start and stage_steps (0 = size the schedule from the measured speed).
    """
    stage_start, stage_steps = info["stage_start"], info["stage_steps"]
    model.train()
    params = [p for p in model.parameters()]
    loss_acc, n_acc, wait_acc = torch.zeros((), device=device), 0, 0.0
    t_mark, step_mark, rate_t0, rate_s0 = time.time(), step, None, None
    snapshot = None
    last_save = time.time()
    t_wait = time.time()
    for batch in batches:
        wait_acc += time.time() - t_wait
        batch = to_device(batch, device)
        s_in = step - stage_start
        if stage_steps == 0 and s_in == RATE_FROM:
            rate_t0, rate_s0 = time.time(), step
        if stage_steps == 0 and rate_t0 is not None and s_in == RATE_TO:
            rate = (step - rate_s0) / (time.time() - rate_t0)
            stage_steps = s_in + int(rate * (train_end - time.time()) * 0.97)
            info["stage_steps"] = stage_steps
            log(f"measured {rate:.2f} steps/s -> this stage's schedule has {stage_steps} steps")
        lr = lr_at(s_in, stage_steps or 10 ** 6, args.lr, args.warmup, args.min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = lr
        loss = compute_loss(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
        loss_acc += loss.detach()
        n_acc += 1
        step += 1
        if step % 50 == 0:
            mean_loss = (loss_acc / n_acc).item()
            if not math.isfinite(mean_loss) or not math.isfinite(gnorm.item()):
                if snapshot is None:
                    raise RuntimeError(f"non-finite loss at step {step} and no snapshot")
                model.load_state_dict(snapshot[0])
                opt.load_state_dict(snapshot[1])
                args.lr *= 0.5
                log(f"non-finite loss at step {step}: back to step {snapshot[2]}'s weights, "
                    f"peak lr now {args.lr}")
                info.setdefault("restarts", []).append([step, snapshot[2], args.lr])
                loss_acc, n_acc = torch.zeros((), device=device), 0
                t_wait = time.time()
                continue
            if step % 100 == 0:
                dt = time.time() - t_mark
                log(f"step {step} loss {mean_loss:.4f} lr {lr:.2e} gnorm {gnorm.item():.3f} "
                    f"{(step - step_mark) / dt:.2f} steps/s, data wait {wait_acc / dt * 100:.0f}%")
                info["history"].append([step, round(mean_loss, 5),
                                        round(time.time() - T_START, 1)])
                t_mark, step_mark, wait_acc = time.time(), step, 0.0
                loss_acc, n_acc = torch.zeros((), device=device), 0
            if step % 500 == 0:
                snapshot = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()),
                            step)
        if time.time() - last_save > 150:
            info["step"] = step
            save_state(state_path, model, opt, info)
            last_save = time.time()
        done = step - stage_start
        if time.time() >= train_end or (stage_steps and done >= stage_steps) or \
                (args.stop_after and done >= args.stop_after):
            break
        t_wait = time.time()
    return step


# ---------------------------------------------------------------------------------------------
# Start-up checks


def check_processor(processor, prompts):
    tok = processor.tokenizer
    ids = tok("<|im_start|>system\nYou are a helpful assistant.<|im_end|>",
              add_special_tokens=False)["input_ids"]
    want = [151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645]
    if ids != want:
        raise RuntimeError(f"tokenizer gives {ids}, spec 5.2 says {want}")
    from PIL import Image
    img = Image.new("RGB", (448, 448), (245, 245, 245))
    enc = processor(text=[prompts[scenes.Q_DESCRIBE]], images=[img], return_tensors="pt")
    n_pad = int((enc["input_ids"] == evaluate.IMAGE_PAD_ID).sum())
    grid = enc["image_grid_thw"].tolist()
    log(f"processor: keys {sorted(enc.keys())}, 448x448 -> grid {grid}, {n_pad} image tokens, "
        f"pixel_values {tuple(enc['pixel_values'].shape)}")
    if grid != [[1, 32, 32]] or n_pad != 256:
        raise RuntimeError("448x448 must give grid (1,32,32) and 256 image tokens")
    enc = processor(text=[prompts[scenes.Q_DESCRIBE]], images=[Image.new("RGB", (300, 300))],
                    return_tensors="pt")
    if enc["image_grid_thw"].tolist() != [[1, 22, 22]]:
        raise RuntimeError(f"300x300 gave grid {enc['image_grid_thw'].tolist()}, want (1,22,22)")


def check_fast_paths(model, batch):
    """The batched vision attention must reproduce the stock modules (fp32, TF32 off)."""
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    FastAttention.num_images = int(inputs["image_grid_thw"].shape[0])
    model.eval()
    outs = []
    calls = FastAttention.calls
    with torch.no_grad():
        for enabled in (False, True, True):
            FastAttention.enabled = enabled
            outs.append(model.model(**inputs, use_cache=False).last_hidden_state.float())
    calls = FastAttention.calls - calls
    model.train()
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    d1 = (outs[0] - outs[1]).abs().max().item()
    d2 = (outs[0] - outs[2]).abs().max().item()
    scale = outs[0].abs().max().item()
    ok = max(d1, d2) <= 1e-4 * max(1.0, scale)
    log(f"fast vision attention vs stock: max |diff| {d1:.3g} / {d2:.3g} (output max "
        f"{scale:.3g}), {calls} fast calls in 2 forwards -> {'using it' if ok else 'DISABLED'}")
    FastAttention.enabled = ok
    return ok


def smoke(model, processor, prompts, args, device, work_dir):
    """Exercise every path once on a throwaway copy before the long run."""
    t0 = time.time()
    batch = make_batch(processor, prompts, args.seed, 0, args.batch_size)
    t_batch = time.time() - t0
    lab = batch["labels"][0]
    log(f"smoke: one batch of {args.batch_size} built in-process in {t_batch:.2f}s "
        f"(~{args.workers / t_batch:.1f} batches/s with {args.workers} workers); shapes "
        f"{ {k: tuple(v.shape) for k, v in batch.items()} }")
    log(f"smoke: row 0 answer tokens {processor.tokenizer.decode(lab[lab != -100])!r}")
    trial = copy.deepcopy(model)
    install_fast_paths(trial)
    gpu_batch = to_device(batch, device)
    check_fast_paths(trial, gpu_batch)
    opt = make_optimizer(trial, 1e-3, 0.0)
    times = []
    for i in range(8):
        torch.cuda.synchronize()
        t = time.time()
        loss = compute_loss(trial, gpu_batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trial.parameters(), 1.0)
        opt.step()
        torch.cuda.synchronize()
        times.append(time.time() - t)
        if i in (0, 7):
            log(f"smoke: step {i} loss {loss.item():.4f} ({times[-1] * 1000:.0f} ms)")
    log(f"smoke: median train step {np.median(times[2:]) * 1000:.1f} ms at batch "
        f"{args.batch_size}")
    export_dir = export_bf16(trial, os.path.join(work_dir, "smoke_export"))
    eval_dir = evaluate.prepare_model_dir(os.path.join(work_dir, "smoke_eval"), export_dir)
    res = evaluate.evaluate_all(eval_dir, device, n=4, fixture_listing=args.fixture_listing)
    json.dumps(res)
    save_state(os.path.join(work_dir, "smoke_state.pt"), trial, opt, {"smoke": True})
    log(f"smoke: export + reload + eval ok in {res['seconds']}s; total smoke "
        f"{time.time() - t0:.1f}s")
    del trial, opt


# ---------------------------------------------------------------------------------------------
# Main


def parse_args(argv):
    p = argparse.ArgumentParser(description="Train the shapes Qwen2.5-VL (one stage per call).")
    p.add_argument("--out", required=True, help="folder for the exported checkpoint and results")
    p.add_argument("--state-dir", default="/root/shapes-vl-state",
                   help="local disk folder for the resumable state")
    p.add_argument("--stage", type=int, default=1)
    p.add_argument("--init-weights", default=None,
                   help="start from this bf16 checkpoint folder when no state is on disk")
    p.add_argument("--start-step", type=int, default=0,
                   help="global step to continue from with --init-weights (picks fresh batches)")
    p.add_argument("--time-budget", type=float, default=540.0,
                   help="seconds from start until everything (eval, export) must be done")
    p.add_argument("--reserve", type=float, default=75.0,
                   help="seconds kept for the final export and evaluation")
    p.add_argument("--stage-steps", type=int, default=0,
                   help="steps in this stage's schedule; 0 = fit to the time budget")
    p.add_argument("--stop-after", type=int, default=0,
                   help="end the stage after this many steps even if its schedule goes on "
                        "(to replay a stage that the time budget cut short)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--min-lr-frac", type=float, default=0.05)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=scenes.TRAIN_SEED)
    p.add_argument("--workers", type=int, default=14)
    p.add_argument("--eval-n", type=int, default=200)
    p.add_argument("--fixture-listing", default="expected.json")
    p.add_argument("--no-smoke", action="store_true")
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.cuda.get_device_name(0)}, args {vars(args)}")
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.state_dir, exist_ok=True)
    work_dir = tempfile.mkdtemp(prefix="shapes-train-")
    model_dir = evaluate.prepare_model_dir(os.path.join(work_dir, "model"))
    shutil.copyfile(os.path.join(HERE, "model_config.json"), os.path.join(model_dir, "config.json"))

    processor = evaluate.load_processor(model_dir)
    processor.tokenizer.padding_side = "right"
    prompts = {q: evaluate.chat_prompt(processor, q) for q in scenes.QUESTIONS}
    check_processor(processor, prompts)
    used = used_token_ids(processor, prompts, args.seed)
    log(f"{len(used)} token ids used by the task")

    model = build_model(model_dir, args.seed, used)
    n_params = sum(p.numel() for p in model.parameters())
    visual = vision_tower(model)
    n_vision = sum(p.numel() for p in visual.parameters())
    text_cfg = model.config.text_config.to_dict()
    rope = text_cfg.get("rope_parameters", text_cfg.get("rope_scaling"))
    log(f"model: {n_params / 1e6:.2f}M parameters ({n_vision / 1e6:.2f}M vision), attention "
        f"{model.config._attn_implementation}, text rope {rope}")

    state_path = os.path.join(args.state_dir, "state.pt")
    step, info = 0, {"history": []}
    state = None
    if os.path.exists(state_path):
        state = torch.load(state_path, map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])
        info = state["info"]
        step = info["step"]
        log(f"resumed from {state_path} at step {step}")
    elif args.init_weights:
        # from_pretrained maps the legacy tensor names on disk (visual.*, model.*) to the module
        # names (model.visual.*, model.language_model.*); a raw load_state_dict would not.
        from transformers import Qwen2_5_VLForConditionalGeneration
        source = Qwen2_5_VLForConditionalGeneration.from_pretrained(args.init_weights,
                                                                    dtype=torch.float32)
        model.load_state_dict(source.state_dict())
        del source
        log(f"initialised from {args.init_weights} (bf16 weights, fresh optimiser)")
        step = args.start_step
    model.to(device)

    if not args.no_smoke:
        smoke(model, processor, prompts, args, device, work_dir)

    install_fast_paths(model)
    # 336x336: a 12x12 merged grid, whose windows are not all full (the smoke batch had 448x448
    # or another size).
    probe = make_batch(processor, prompts, args.seed, 10 ** 6, 4, size=(336, 336))
    check_fast_paths(model, to_device(probe, device))
    opt = make_optimizer(model, args.lr, args.weight_decay)
    if state is not None:
        opt.load_state_dict(state["opt"])  # Adam moments carry over into a new stage too
    del state

    same_stage = info.get("stage") == args.stage  # a call of this stage was cut short
    stage_start = info["stage_start"] if same_stage else step
    stage_steps = args.stage_steps or (info.get("stage_steps", 0) if same_stage else 0)
    info.update(stage=args.stage, stage_start=stage_start, stage_steps=stage_steps,
                batch_size=args.batch_size, lr=args.lr, warmup=args.warmup,
                min_lr_frac=args.min_lr_frac, seed=args.seed)
    train_end = T_START + args.time_budget - args.reserve
    first_batch = step
    dataset = TrainBatches(processor, prompts, args.seed, args.batch_size, 10 ** 9)
    loader = make_loader(dataset, first_batch, first_batch + 10 ** 7, args.workers)
    log(f"stage {args.stage}: from step {step} (stage start {stage_start}), "
        f"{train_end - time.time():.0f}s of training left")

    step = train_loop(model, opt, loader, device, args, info, step, state_path, train_end)
    del loader

    info["step"] = step
    info["stage_done"] = step - stage_start
    save_state(state_path, model, opt, info)
    log(f"stage {args.stage} ended at step {step} ({step - stage_start} steps this stage); "
        "state saved")

    export_dir = export_bf16(model, os.path.join(work_dir, "export"))
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copyfile(os.path.join(export_dir, name), os.path.join(args.out, name))
    size = os.path.getsize(os.path.join(export_dir, "model.safetensors"))
    log(f"exported bf16 checkpoint: model.safetensors {size} bytes")
    eval_dir = evaluate.prepare_model_dir(os.path.join(work_dir, "eval"), export_dir)
    result = {"info": info, "model_safetensors_bytes": size}
    result["eval_f32"] = evaluate.evaluate_all(eval_dir, device, args.eval_n,
                                               fixture_listing=args.fixture_listing)
    result["eval_bf16"] = evaluate.evaluate_all(eval_dir, device, 0, "bfloat16",
                                                fixture_listing=args.fixture_listing)
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    log(f"done in {time.time() - T_START:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
