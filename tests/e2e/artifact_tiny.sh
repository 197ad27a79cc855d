#!/usr/bin/env bash
# compile -> inspect -> run on the tiny checkpoint, as a user types it (issue 5, acceptance 1):
# the artifact with inline parameters and the program-only one (--params external) must print
# transformers' greedy tokens (expected.json) for an image case, a two-image case and a
# text-only case, identically; inspect must describe both; the usual mistakes must be refused
# by name; stdout must hold the answer only. In-process, tests/unit/
# test_compiler_runtime_artifact.c checks the same artifacts against the reference run.
#   usage: artifact_tiny.sh VLMC VLMC_RUN
set -euo pipefail
VLMC=$1
RUN=$2
CKPT=tests/fixtures/parity/tiny-vocab512
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/lib.sh"

"$VLMC" compile "$CKPT" -o "$WORK/tiny.vlmc" 2>/dev/null
"$VLMC" compile "$CKPT" -o "$WORK/tiny-ext.vlmc" --params external 2>/dev/null
echo "artifacts: inline $(stat -c %s "$WORK/tiny.vlmc") bytes, program-only" \
  "$(stat -c %s "$WORK/tiny-ext.vlmc") bytes"

# inspect: sections, checksums, parameters, and --verify over the lazily checked ones.
out=$("$VLMC" inspect "$WORK/tiny.vlmc")
expect_in "inspect lists the params section (checked on use)" "on use" "$out"
expect_in "inspect counts the parameters" "parameters: 81 tensors, 516640 elements, inline" "$out"
expect_in "inspect lists the program's functions" "@decode" "$out"
# Issue 7, acceptance 3: the cpu kernels cover every dispatch (no interpreter fallback); the
# runtime refuses a table that leaves one out (unit.test_kernel_table).
expect_in "inspect lists the cpu kernels" "linear" "$(grep -E '^    vk[0-9]+ ' <<<"$out")"
expect_in "every dispatch has a cpu kernel" "backend cpu: table checked against the program; every dispatch has a kernel" "$out"
if grep -q "compute ops in no dispatch" <<<"$out"; then fail "a compute op has no dispatch"
else ok "every compute op is in a dispatch"; fi
out=$("$VLMC" inspect "$WORK/tiny-ext.vlmc")
expect_in "inspect says the parameters are external" "external (run with --params" "$out"
if grep -qE '^  params ' <<<"$out"; then fail "the external artifact has a params section"
else ok "the external artifact carries no weights"; fi
if "$VLMC" inspect --verify "$WORK/tiny.vlmc" >/dev/null; then ok "inspect --verify passes"
else fail "inspect --verify failed on a good artifact"; fi

for case in img336 two_images text_only; do
  fixture_field $case input_ids >"$WORK/ids.json"
  images=()
  for image in $(fixture_field $case images); do images+=(--image "$image"); done
  want=$(fixture_field $case greedy_tokens)
  got=$("$RUN" "$WORK/tiny.vlmc" --input-ids "$WORK/ids.json" "${images[@]}" -n 16 --threads 2)
  if same_tokens "$got" "$want"; then
    ok "$case: inline artifact prints transformers' greedy tokens"
  else
    fail "$case: got '$got', transformers '$want'"
  fi
  ext=$("$RUN" "$WORK/tiny-ext.vlmc" --params "$CKPT" --input-ids "$WORK/ids.json" "${images[@]}" \
    -n 16 --threads 2)
  if [ "$ext" = "$got" ]; then ok "$case: --params external prints the same"
  else fail "$case: --params external printed '$ext', inline '$got'"; fi
done

# --batch without a tokenizer: a request of token ids answers transformers' greedy tokens (the
# "tokens" of its JSON line, "text" empty); a text prompt is refused on its own line.
python3 - "$WORK/batch.jsonl" "$(fixture_field img336 input_ids)" \
  "$(fixture_field img336 images)" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"id": 1, "prompt": "hello"}) + "\n")
    f.write(json.dumps({"id": 2, "input_ids": json.loads(sys.argv[2]),
                        "images": sys.argv[3].split(), "max_new_tokens": 16}) + "\n")
EOF
rc=0
"$RUN" "$WORK/tiny.vlmc" --batch "$WORK/batch.jsonl" --threads 2 >"$WORK/batch.out" 2>/dev/null || rc=$?
want=$(fixture_field img336 greedy_tokens)
python3 - "$WORK/batch.out" "$want" "$rc" <<'EOF' &&
import json, sys
a = [json.loads(line) for line in open(sys.argv[1])]
assert sys.argv[3] == "1" and len(a) == 2, (sys.argv[3], a)
assert "has no tokenizer" in a[0]["error"] and "give input_ids" in a[0]["error"], a[0]
assert a[1]["text"] == "" and a[1]["tokens"] == [int(t) for t in sys.argv[2].split()], a[1]
EOF
  ok "--batch without a tokenizer: input_ids answer transformers' tokens, a text prompt is refused" ||
  fail "--batch without a tokenizer: rc $rc, $(cut -c1-300 "$WORK/batch.out")"

# The answer alone on stdout; --stats on stderr.
fixture_field text_only input_ids >"$WORK/ids.json"
"$RUN" "$WORK/tiny.vlmc" --input-ids "$WORK/ids.json" -n 4 --stats >"$WORK/out" 2>"$WORK/err"
if [ "$(wc -l <"$WORK/out")" = 1 ] && grep -qE '^[0-9 ]+$' "$WORK/out"; then
  ok "stdout holds the answer only"
else fail "stdout: $(cat "$WORK/out")"; fi
expect_in "--stats goes to stderr" "stats: backend " "$(cat "$WORK/err")"

# Chat with token ids (-i --input-ids): each stdin line holds a turn's new ids; the second
# answer equals a fresh run over the whole conversation (--ids-out gives its ids).
printf '[5, 6, 7]\n' | "$RUN" "$WORK/tiny.vlmc" -i --input-ids "$WORK/ids.json" -n 3 \
  --ids-out "$WORK/turns.jsonl" >"$WORK/answers"
same "chat with ids answers two turns" "$(wc -l <"$WORK/answers")" 2
python3 - "$WORK/turns.jsonl" "$WORK/context.json" <<'EOF' &&
import json, sys
t1, t2 = [json.loads(line) for line in open(sys.argv[1])]
assert t2["context"] == t1["context"] + t1["generated"] + [5, 6, 7], "context"
json.dump(t2["context"], open(sys.argv[2], "w"))
EOF
  ok "turn 2's context is turn 1's, its answer and the new ids" || fail "turn 2's context"
same "a fresh run of that context answers the same" \
  "$("$RUN" "$WORK/tiny.vlmc" --input-ids "$WORK/context.json" -n 3)" "$(sed -n 2p "$WORK/answers")"

# Mistakes, each refused with a message that says what to do.
refused() { # WHAT NEEDLE COMMAND...
  local what=$1 needle=$2 err
  shift 2
  if err=$("$@" 2>&1 >/dev/null); then fail "$what: accepted"; return; fi
  expect_in "$what" "$needle" "$err"
}
refused "external artifact without --params" "give the checkpoint folder with --params DIR" \
  "$RUN" "$WORK/tiny-ext.vlmc" --input-ids "$WORK/ids.json"
refused "inline artifact with --params" "the parameters are inline" \
  "$RUN" "$WORK/tiny.vlmc" --params "$CKPT" --input-ids "$WORK/ids.json"
refused "text prompt for a model without tokenizer" "has no tokenizer" \
  "$RUN" "$WORK/tiny.vlmc" -p "hello"
refused "prompt longer than --max-context" "needs a context of 28, more than --max-context 20" \
  "$RUN" "$WORK/tiny.vlmc" --input-ids "$WORK/ids.json" -n 4 --max-context 20
refused "a missing artifact" "$WORK/none.vlmc" "$RUN" "$WORK/none.vlmc" -p x
refused "a bad -n" "-n: expected a positive integer" "$RUN" "$WORK/tiny.vlmc" -n 0 -p x
refused "a bad --top-p" "--top-p: expected a number in (0, 1]" \
  "$RUN" "$WORK/tiny.vlmc" --top-p 1.5 -p x
refused "a chat line that is not a list of ids" "stdin:3: [1]: expected a token id" \
  bash -c "printf '[4]\n\n[4, \"x\"]\n' | '$RUN' '$WORK/tiny.vlmc' -i --input-ids '$WORK/ids.json' -n 2"
head -c 1000 "$WORK/tiny.vlmc" >"$WORK/cut.vlmc"
refused "a truncated artifact" "header: file_size says" "$RUN" "$WORK/cut.vlmc" -p x

summary
