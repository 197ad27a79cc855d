#!/usr/bin/env bash
# The tools' command-line conventions (issue 20, tools/cli.h), as a user of llama.cpp expects
# them: --version on both tools; --name=value, -n5 and -n 5 give the same run; -f FILE and
# -f - give the prompt from a file or stdin, as -p does; an unknown option, a missing value
# and a value on a switch are usage errors (exit 2) that name the option; a failure exits 1;
# a prompt longer than the model's positions is refused by default, by name; a checkpoint
# without a processor config compiles with a warning that names the defaults it gets;
# --min-pixels / --max-pixels change the images' resize at run time; --repeat-penalty,
# --min-p, --ignore-eos and --stop; the checkpoint's generation_config.json as the default.
#   usage: cli_conventions.sh VLMC VLMC_RUN
set -euo pipefail
VLMC=$1
RUN=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"

IMAGE=tests/fixtures/test_image_shapes.png
PROMPT="What shapes and colors are in this image? Answer briefly."
ART=$WORK/s.vlmc
compile_or_stop "$VLMC" assets/shapes-vl "$ART" ref

v=$("$VLMC" --version)
expect_in "vlmc --version: version and git revision" "vlmc 0.1 (git " "$v"
expect_in "vlmc --version: targets" "targets: ref, cpu" "$v"
v=$("$RUN" --version)
expect_in "vlmc-run --version: version and git revision" "vlmc-run 0.1 (git " "$v"
expect_in "vlmc-run --version: backends" "backends: cpu" "$v"

base=$("$RUN" "$ART" --quiet -n 6 --image "$IMAGE" -p "$PROMPT")
same "-n6 --image=IMG --prompt=TEXT" "$("$RUN" "$ART" --quiet -n6 --image="$IMAGE" --prompt="$PROMPT")" "$base"
same "-- before the artifact" "$("$RUN" --quiet -n 6 --image "$IMAGE" -p "$PROMPT" -- "$ART")" "$base"
printf '%s\n' "$PROMPT" >"$WORK/prompt.txt"
same "-f FILE" "$("$RUN" "$ART" --quiet -n 6 --image "$IMAGE" -f "$WORK/prompt.txt")" "$base"
same "-f - (stdin)" "$("$RUN" "$ART" --quiet -n 6 --image "$IMAGE" -f - <"$WORK/prompt.txt")" "$base"
sampled=$("$RUN" "$ART" --quiet -n 6 -t 0.8 --seed 3 -p "$PROMPT" --image "$IMAGE")
same "--seed=3 --temperature=0.8" \
  "$("$RUN" "$ART" --quiet -n6 --temperature=0.8 --seed=3 -p "$PROMPT" --image "$IMAGE")" "$sampled"

usage_error() { # WHAT NEEDLE ARGS...: exit 2 and a message naming the option
  local what=$1 needle=$2 rc=0 out
  shift 2
  out=$("$RUN" "$@" 2>&1) || rc=$?
  if [ "$rc" -eq 2 ] && grep -qF -- "$needle" <<<"$out"; then ok "$what (exit 2): $out"
  else fail "$what: exit $rc, '$out'"; fi
}
usage_error "an unknown option is named" "unknown option '--bogus'" "$ART" -p hi --bogus
usage_error "a trailing option without its value" "-p needs a value" "$ART" -p
usage_error "a value on a switch" "takes no value: '--stats=1'" "$ART" --stats=1 -p hi
usage_error "-p and -f together" "either -p or -f" "$ART" -p hi -f "$WORK/prompt.txt"
usage_error "-f - with -i (both read stdin)" "-f - reads the prompt from stdin" "$ART" -i -f -
rc=0
out=$("$RUN" "$ART" -f "$WORK/missing.txt" 2>&1) || rc=$?
if [ "$rc" -eq 2 ] && grep -q "missing.txt" <<<"$out"; then ok "-f of a missing file is named: $out"
else fail "-f missing: exit $rc, '$out'"; fi
# a checkpoint without a processor config compiles with a warning naming the defaults
mkdir -p "$WORK/nopre"
for f in assets/shapes-vl/*; do
  case $(basename "$f") in preprocessor_config.json|processor_config.json) ;; *) ln -s "$PWD/$f" "$WORK/nopre/";; esac
done
out=$("$VLMC" compile "$WORK/nopre" --target ref -o "$WORK/np.vlmc" 2>&1) || true
expect_in "a missing processor config is warned about, with the defaults" \
  "has no preprocessor_config.json or processor_config.json: images get Qwen2.5-VL's processor defaults (min_pixels 3136" "$out"
if grep -q "processor defaults" "$ART.log"; then fail "the warning shows for a checkpoint with a processor config"
else ok "no warning for a checkpoint with its processor config"; fi

# the default context is the model's positions (config.json max_position_embeddings: 32768)
expect_in "inspect shows the model's positions" "context: 32768 positions" "$("$VLMC" inspect "$ART")"
python3 -c "print('word ' * 33000)" >"$WORK/long.txt"
rc=0
out=$("$RUN" "$ART" -f "$WORK/long.txt" -n 4 2>&1) || rc=$?
if [ "$rc" -eq 1 ] && grep -q "more than the model's 32768 positions" <<<"$out"; then
  ok "a prompt past the model's positions is refused by name (exit 1)"
else fail "a 33k-token prompt: exit $rc, '$out'"; fi
# --min-pixels / --max-pixels at run time, as transformers' processor kwargs: the 224x448 scene
# resized by spec 2.1's smart_resize (factor 28) becomes 8x16 = 128 image pads by default,
# 140x308 = 5x11 = 55 under --max-pixels 50176 (beta = sqrt(100352 / 50176), floors) and
# 336x644 = 12x23 = 276 under --min-pixels 200704 (the same beta, ceilings)
pads() { # ARGS...: the image pads of the first turn's context
  "$RUN" "$ART" --quiet -n 1 --image tests/fixtures/images/scene_224x448.png -p "$PROMPT" \
    --ids-out "$WORK/ids.jsonl" "$@" >/dev/null
  python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['context'].count(151655))" \
    "$WORK/ids.jsonl"
}
same "the artifact's pixel limits: 128 image pads" "$(pads)" 128
same "--max-pixels 50176: 55 image pads" "$(pads --max-pixels 50176)" 55
same "--min-pixels=200704: 276 image pads" "$(pads --min-pixels=200704)" 276
rc=0
out=$("$RUN" "$ART" -p hi --min-pixels 900000 --max-pixels 50000 2>&1) || rc=$?
if [ "$rc" -eq 1 ] && grep -q "min_pixels (900000) is larger than max_pixels (50000)" <<<"$out"; then
  ok "--min-pixels above --max-pixels is refused by name (exit 1)"
else fail "--min-pixels 900000 --max-pixels 50000: exit $rc, '$out'"; fi
usage_error "--max-pixels 0" "--max-pixels: expected a positive integer" "$ART" -p hi --max-pixels 0
# generation controls: --repeat-penalty 1 is off (the greedy answer), a strong one changes
# the answer (the ids of "a"/"and" are in the prompt and the answer); --ignore-eos runs to -n
same "--repeat-penalty 1 is the plain greedy answer" \
  "$("$RUN" "$ART" --quiet -n 6 --image "$IMAGE" -p "$PROMPT" --repeat-penalty=1)" "$base"
pen=$("$RUN" "$ART" --quiet -n 6 --image "$IMAGE" -p "$PROMPT" --repeat-penalty 50)
if [ "$pen" != "$base" ]; then ok "--repeat-penalty 50 changes the greedy answer: '$pen'"
else fail "--repeat-penalty 50 gave the unpenalized answer '$base'"; fi
"$RUN" "$ART" --quiet -n 24 --ignore-eos --image "$IMAGE" -p "$PROMPT" --ids-out "$WORK/eos.jsonl" >/dev/null
same "--ignore-eos: the answer runs to -n 24" \
  "$(python3 -c "import json,sys; print(len(json.loads(open(sys.argv[1]).readline())['generated']))" "$WORK/eos.jsonl")" 24
usage_error "--repeat-penalty 0" "--repeat-penalty: expected a number > 0" "$ART" -p hi --repeat-penalty 0
usage_error "--min-p 2" "--min-p: expected a number in [0, 1]" "$ART" -p hi --min-p 2
# --stop: the answer ends before the first stop string (here the plain answer's second word)
word=$(python3 -c 'import sys; w = sys.argv[1].split(); print(w[1] if len(w) > 1 else w[0])' "$base")
want=$(python3 -c 'import sys; t, w = sys.argv[1:]; print(t[:t.find(w)])' "$base" "$word")
same "--stop '$word': the answer up to it" \
  "$("$RUN" "$ART" --quiet -n 6 --image "$IMAGE" -p "$PROMPT" --stop zzz --stop "$word")" "$want"
usage_error "--stop with --ids" "--stop matches the answer's text" "$ART" -p hi --ids --stop x
# the checkpoint's generation_config.json is the default, as transformers' generate(): with
# Qwen2.5-VL-3B-Instruct's (do_sample, temperature 0.1, top_k 1, top_p 0.001, repetition
# penalty 1.05) the answer is the greedy one under the 1.05 penalty; a flag overrides a field
mkdir -p "$WORK/gen"
for f in assets/shapes-vl/*; do
  [ "$(basename "$f")" = generation_config.json ] || ln -s "$PWD/$f" "$WORK/gen/"
done
cp tests/fixtures/configs/generation_config.json "$WORK/gen/"
compile_or_stop "$VLMC" "$WORK/gen" "$WORK/gen.vlmc" ref
expect_in "inspect shows the generation defaults" \
  "generation: do_sample, temperature 0.1, top_k 1, top_p 0.001, repetition_penalty 1.05" \
  "$("$VLMC" inspect "$WORK/gen.vlmc")"
expect_in "inspect: greedy where the checkpoint says do_sample false" \
  "generation: greedy (do_sample false)" "$("$VLMC" inspect "$ART")"
gen=$("$RUN" "$WORK/gen.vlmc" --quiet -n 6 --image "$IMAGE" -p "$PROMPT" --repeat-penalty 50)
same "a flag overrides its field (--repeat-penalty 50 over 1.05)" "$gen" "$pen"
gen=$("$RUN" "$WORK/gen.vlmc" --quiet -n 6 --image "$IMAGE" -p "$PROMPT")
same "the default is the config's: greedy (top_k 1) under repetition_penalty 1.05" "$gen" \
  "$("$RUN" "$ART" --quiet -n 6 --image "$IMAGE" -p "$PROMPT" --repeat-penalty 1.05)"
rc=0
out=$("$RUN" "$WORK/none.vlmc" -p hi 2>&1) || rc=$?
if [ "$rc" -eq 1 ]; then ok "a missing artifact is a failure (exit 1): $out"
else fail "a missing artifact: exit $rc, '$out'"; fi
summary
