#!/usr/bin/env bash
# Every file a user can point vlmc or vlmc-run at, given a FIFO or /dev/zero instead (issue 12):
# each is refused at once, by name ("PATH: not a regular file"), with a nonzero exit. Without
# the check a FIFO blocks the open forever and /dev/zero reads until memory runs out; `timeout
# 10` turns either into a failure here. The files a checkpoint folder holds (config.json,
# model.safetensors, tokenizer.json, ...) are checked the same way, and so is vlmc-run --params
# DIR's shard. An output that exists and is not a regular file is refused, not replaced.
#   usage: special_files.sh VLMC VLMC_RUN
set -euo pipefail
VLMC=$1
RUN=$2
CKPT=tests/fixtures/parity/tiny-vocab512
EXT=tests/e2e/data/tiny-vocab512-external.vlmc
IMAGE=tests/fixtures/images/square_336.png
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/lib.sh"

mkfifo "$WORK/fifo"
echo '[5, 6, 7]' >"$WORK/ids.json"

# refused WHAT PATH COMMAND...: COMMAND exits nonzero within 10 s and names PATH as not a
# regular file. stdin is /dev/null, so that nothing waits on the terminal.
refused() {
  local what=$1 path=$2 err rc=0
  shift 2
  err=$(timeout 10 "$@" 2>&1 >/dev/null </dev/null) || rc=$?
  if [ "$rc" -eq 0 ]; then fail "$what: accepted"
  elif [ "$rc" -eq 124 ]; then fail "$what: still running after 10 s"
  else expect_in "$what" "$path: not a regular file" "$err"; fi
}

# Each file argument, as a FIFO and as a character device.
for special in "$WORK/fifo" /dev/zero; do
  kind=$([ -p "$special" ] && echo FIFO || echo /dev/zero)
  refused "vlmc compile --program $kind" "$special" \
    "$VLMC" compile "$CKPT" --target ref --program "$special" -o "$WORK/out.vlmc"
  refused "vlmc opt $kind" "$special" "$VLMC" opt "$special" --passes canonicalize
  refused "vlmc inspect $kind" "$special" "$VLMC" inspect "$special"
  refused "vlmc tokenize $kind" "$special" "$VLMC" tokenize "$special"
  refused "vlmc preprocess --image $kind" "$special" \
    "$VLMC" preprocess --image "$special" -o "$WORK/pixels.safetensors"
  refused "vlmc diff-taps $kind (first)" "$special" "$VLMC" diff-taps "$special" "$CKPT/model.safetensors"
  refused "vlmc diff-taps $kind (second)" "$special" "$VLMC" diff-taps "$CKPT/model.safetensors" "$special"
  refused "vlmc random-checkpoint --config $kind" "$special" \
    "$VLMC" random-checkpoint --config "$special" -o "$WORK/random"
  refused "vlmc kernel-test $kind" "$special" "$VLMC" kernel-test "$special"
  refused "vlmc-run MODEL $kind" "$special" "$RUN" "$special" -p hi
  refused "vlmc-run --load-only $kind" "$special" "$RUN" "$special" --load-only
  refused "vlmc-run --image $kind" "$special" \
    "$RUN" "$EXT" --params "$CKPT" --image "$special" --input-ids "$WORK/ids.json" -n 1
  refused "vlmc-run --input-ids $kind" "$special" \
    "$RUN" "$EXT" --params "$CKPT" --input-ids "$special" -n 1
done

# A copy of the tiny checkpoint (links to its files) whose file NAME is a FIFO or /dev/zero.
checkpoint_with() { # NAME fifo|zero -> prints the folder
  local dir="$WORK/ckpt-$1-$2" f
  rm -rf "$dir"
  mkdir "$dir"
  for f in "$PWD/$CKPT"/*; do ln -s "$f" "$dir/"; done
  rm -f "$dir/$1"
  if [ "$2" = fifo ]; then mkfifo "$dir/$1"; else ln -s /dev/zero "$dir/$1"; fi
  echo "$dir"
}

for name in config.json model.safetensors generation_config.json preprocessor_config.json \
            tokenizer.json chat_template.jinja; do
  for special in fifo zero; do
    dir=$(checkpoint_with "$name" "$special")
    refused "vlmc compile: the checkpoint's $name is a $special" "$dir/$name" \
      "$VLMC" compile "$dir" --target ref -o "$WORK/out.vlmc"
  done
done

# vlmc-run --params DIR: the shard the manifest names.
for special in fifo zero; do
  dir=$(checkpoint_with model.safetensors "$special")
  refused "vlmc-run --params: the shard is a $special" "$dir/model.safetensors" \
    "$RUN" "$EXT" --params "$dir" --input-ids "$WORK/ids.json" -n 1
done

# Outputs: a FIFO given as -o is refused and left in place (renaming over it would replace it).
refused "vlmc compile -o FIFO" "$WORK/fifo" "$VLMC" compile "$CKPT" --target ref -o "$WORK/fifo"
refused "vlmc preprocess -o FIFO" "$WORK/fifo" \
  "$VLMC" preprocess --image "$IMAGE" -o "$WORK/fifo"
if [ -p "$WORK/fifo" ]; then ok "the FIFO given as -o is still a FIFO"
else fail "the FIFO given as -o was replaced"; fi

summary
