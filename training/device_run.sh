#!/bin/bash
# One training stage on a CUDA machine (see training/README.md).
#   bash training/device_run.sh STAGE [train.py options...]
# Writes into $OUT (default ./out): train_stageN.log and ckpt/ (config.json,
# generation_config.json, result.json, model.safetensors split into parts of 15 MB, because
# the machine that ran it hands back files of at most 16 MiB; join them with
# `cat model.safetensors.part* > model.safetensors`).
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
stage=${1:?usage: device_run.sh STAGE [train.py options]}
shift
out=${OUT:-out}
mkdir -p "$out/ckpt"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
{ nproc; free -g | head -2; df -h /dev/shm "${TMPDIR:-/tmp}"; nvidia-smi -L; } 2>&1 | sed 's/^/# /'
python3 training/train.py --out "$out/ckpt" --stage "$stage" "$@" 2>&1 \
    | tee "$out/train_stage$stage.log"
rc=$?
if [ -f "$out/ckpt/model.safetensors" ]; then
    sha256sum "$out/ckpt/model.safetensors" | tee "$out/ckpt/model.safetensors.sha256"
    split -b 15000000 -d "$out/ckpt/model.safetensors" "$out/ckpt/model.safetensors.part"
    rm "$out/ckpt/model.safetensors"
fi
ls -la "$out" "$out/ckpt"
exit $rc
