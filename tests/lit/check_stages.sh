#!/usr/bin/env bash
# Usage: check_stages.sh STAGES DUMP_DIR
# STAGES is the stderr of `vlmc opt --print-ir-after-all --dump-dir=DUMP_DIR`. Checks that
# each printed stage is byte-identical to its NN-<pass>.vir dump, and that every dump
# (00-input.vir included) parses and prints back to itself.
set -euo pipefail
stages=$1
dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

awk -v out="$work/stage" '
  /^\/\/ -----\/\/ IR Dump After / { n++; file = sprintf("%s-%02d.vir", out, n); next }
  n { print > file }
' "$stages"

count=0
for stage in "$work"/stage-*.vir; do
  [ -e "$stage" ] || break
  n=${stage##*stage-}
  n=${n%.vir}
  dump=$(ls "$dir"/"$n"-*.vir)
  diff -u "$dump" "$stage"
  count=$((count + 1))
done
[ "$count" -gt 0 ] || { echo "check_stages: no stages in $stages" >&2; exit 1; }

for dump in "$dir"/*.vir; do
  vlmc opt "$dump" | diff -u "$dump" -
done
echo "check_stages: $count stages match their dumps; all dumps round-trip"
