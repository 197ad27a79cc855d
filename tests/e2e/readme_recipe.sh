#!/usr/bin/env bash
# The README's plant-a-bug recipe, run as written (issue 20): the block after
# `<!-- recipe: plant-a-bug -->` runs in a scratch folder (build/, assets/ and tests/ linked
# in), each command must succeed, and the broken artifact's answer must differ from the
# correct one's. Then a reused --dump-dir: the earlier run's dumps are removed, other files
# stay.
#   usage: readme_recipe.sh VLMC
set -euo pipefail
VLMC=$1
ROOT=$PWD
BUILD=$(cd "$(dirname "$VLMC")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"

awk '/<!-- recipe: plant-a-bug -->/ {on = 1; next} on && /^```sh/ {inside = 1; next}
     inside && /^```/ {exit} inside {print}' README.md >"$WORK/recipe.sh"
if [ "$(grep -c 'build/tools/' "$WORK/recipe.sh")" -lt 4 ]; then
  fail "README: no plant-a-bug recipe block found"
  summary
  exit 1
fi
ln -s "$BUILD" "$WORK/build"
ln -s "$ROOT/assets" "$WORK/assets"
ln -s "$ROOT/tests" "$WORK/tests"
if (cd "$WORK" && bash -e recipe.sh >out.txt 2>err.txt); then ok "the recipe runs as written"
else fail "the recipe: $(tail -3 "$WORK/err.txt")"; fi
good=$(sed -n 1p "$WORK/out.txt")
broken=$(sed -n 2p "$WORK/out.txt")
if [ -n "$good" ] && [ -n "$broken" ] && [ "$good" != "$broken" ]; then
  ok "the planted bug changes the answer: '$good' -> '$broken'"
else
  fail "the answers: '$good' and '$broken'"
fi
# A reused --dump-dir holds this run's dumps only: an earlier run's are removed (named),
# other files stay.
touch "$WORK/dumps/09-stale-pass.vir" "$WORK/dumps/notes.txt"
log=$("$VLMC" compile assets/shapes-vl -o "$WORK/again.vlmc" --dump-dir "$WORK/dumps" 2>&1) || true
if [ ! -e "$WORK/dumps/09-stale-pass.vir" ] && [ -e "$WORK/dumps/notes.txt" ] &&
   [ -e "$WORK/dumps/08-memory-plan.vir" ]; then
  ok "a reused --dump-dir loses the stale dump, keeps other files: $(grep -o 'removed [0-9]* dumps.*' <<<"$log" | head -1)"
else
  fail "reused --dump-dir: $(ls "$WORK/dumps" | tr '\n' ' ')"
fi
summary
