#!/usr/bin/env bash
# vlmc-run for users, with the trained shapes model (assets/shapes-vl): chat through stdin with
# the KV cache kept between turns, and the single-prompt options.
#   - `-i`: two turns about the bug report's image: the description, then "How many shapes are
#     in this image? Answer briefly." which must answer "3."; the second turn fed only its new
#     tokens ("<|im_end|>\n<|im_start|>user\n...", from the template) on top of the cache, and
#     its answer must equal a fresh single-turn run of the whole conversation's token ids
#     (--ids-out gives them; --input-ids feeds them back);
#   - --max-context refuses a prompt that does not fit, by name (the refusal of a later chat
#     turn is tests/unit/test_compiler_runtime_chat.c's);
#   - --seed with -t/--top-k/--top-p repeats; --system changes the prompt; several --image;
#     stdout holds the answers only, --stats goes to stderr;
#   - --batch: requests from a file (or stdin), one JSON answer line each, on one load; each
#     answer equals the single-prompt run's; a bad request (missing image, unknown key, not
#     JSON, a line past the length limit) is answered with its error and the next one runs;
#     the exit status says that some failed; flags that give prompts are refused beside it;
#   - the chat's controls (tests/e2e/chat_controls.py): Ctrl-C stops an answer and, at the
#     prompt, the chat; /image, /clear, /exit; a line ending in a backslash continues.
# The ref backend is slow (~0.3 s per decode step here), so every run is made to count.
#   usage: chat_shapes.sh VLMC VLMC_RUN
set -euo pipefail
VLMC=$1
RUN=$2
IMAGE=tests/fixtures/test_image_shapes.png
Q1="What shapes and colors are in this image? Answer briefly."
Q2="How many shapes are in this image? Answer briefly."
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/lib.sh"

"$VLMC" compile assets/shapes-vl -o "$WORK/shapes.vlmc" 2>/dev/null
M="$WORK/shapes.vlmc"

# ---- chat ----
printf '%s\n%s\n' "$Q1" "$Q2" |
  "$RUN" "$M" -i --image "$IMAGE" --threads 2 --stats --ids-out "$WORK/turns.jsonl" \
    >"$WORK/answers" 2>"$WORK/stats"
same "chat answers one line per turn" "$(wc -l <"$WORK/answers")" 2
same "turn 1 describes the image" "$(sed -n 1p "$WORK/answers")" \
  "A red square, a green triangle and a blue circle."
same "turn 2 counts the shapes" "$(sed -n 2p "$WORK/answers")" "3."

# The second turn continued the cache: its context is the first one's, the first answer
# without its end-of-sequence id, then only the template's continuation.
python3 - "$WORK/turns.jsonl" "$WORK" <<'EOF' &&
import json, sys
t1, t2 = [json.loads(line) for line in open(sys.argv[1])]
im_end, newline, im_start = 151645, 198, 151644
answer = t1["generated"][:-1] if t1["generated"][-1] == im_end else t1["generated"]
head = t1["context"] + answer
assert t2["context"][:len(head)] == head, "turn 2 does not start with turn 1 + its answer"
tail = t2["context"][len(head):]
assert tail[:3] == [im_end, newline, im_start], tail[:3]
assert tail[-3:] == [im_start, 77091, newline], tail[-3:]  # <|im_start|>assistant\n
json.dump(t2["context"], open(sys.argv[2] + "/context2.json", "w"))
print(" ".join(map(str, t2["generated"])), file=open(sys.argv[2] + "/generated2", "w"))
print("turn 2 fed %d new tokens on top of %d" % (len(tail), len(head)))
EOF
  ok "turn 2 extends turn 1's context" || fail "turn 2 does not extend turn 1's context"
grep -q "| turn 2: context" "$WORK/stats" && ok "--stats reports each turn on stderr" ||
  fail "--stats: $(cat "$WORK/stats")"

# A fresh single-turn run of the whole conversation gives the same second answer.
fresh=$("$RUN" "$M" --input-ids "$WORK/context2.json" --image "$IMAGE" --threads 2 \
  --ids-out "$WORK/fresh.jsonl")
same "a fresh run of the conversation answers the same" "$fresh" "3."
jsonl_field() { # FILE KEY: KEY of the first line, space-separated
  python3 -c 'import json, sys
print(" ".join(map(str, json.loads(open(sys.argv[1]).readline())[sys.argv[2]])))' "$1" "$2"
}
same "... with the same token ids" "$(jsonl_field "$WORK/fresh.jsonl" generated)" \
  "$(cat "$WORK/generated2")"

# A prompt that does not fit --max-context is refused by name, before any work.
rc=0
"$RUN" "$M" --image "$IMAGE" -p "$Q1" -n 16 --max-context 300 >"$WORK/out" 2>"$WORK/err" || rc=$?
want="the prompt has 289 tokens; with 16 new tokens it needs a context of 305, more than"
if [ "$rc" -ne 0 ] && [ ! -s "$WORK/out" ] && grep -qF "$want --max-context 300" "$WORK/err"; then
  ok "a prompt that does not fit is refused by name"
else
  fail "--max-context: rc $rc, stderr: $(cat "$WORK/err")"
fi

# ---- one prompt ----
run1() { "$RUN" "$M" --image "$IMAGE" -p "$Q1" --threads 2 "$@"; }
a=$(run1 -t 1.2 --top-k 40 --top-p 0.9 --seed 7 -n 4 --ids)
b=$(run1 -t 1.2 --top-k 40 --top-p 0.9 --seed 7 -n 4 --ids)
same "the same --seed samples the same tokens" "$a" "$b"
run1 --system "You count shapes." -n 1 --ids-out "$WORK/system.jsonl" >/dev/null
python3 - "$WORK/system.jsonl" "$WORK/turns.jsonl" <<'EOF' &&
import json, sys
custom, default = (json.loads(open(p).readline())["context"] for p in sys.argv[1:])
assert custom[:3] == default[:3] == [151644, 8948, 198], (custom[:3], default[:3])
assert custom[3:custom.index(151645)] != default[3:default.index(151645)]
EOF
  ok "--system replaces the default system prompt" || fail "--system did not change the prompt"
"$RUN" "$M" --image "$IMAGE" --image tests/fixtures/shapes_scenes/scene_336x336_00.png \
  -p "$Q1" -n 2 --ids-out "$WORK/two.jsonl" --threads 2 >/dev/null
starts=$(jsonl_field "$WORK/two.jsonl" context | tr ' ' '\n' | grep -c '^151652$')
same "several --image give several image blocks (<|vision_start|>)" "$starts" 2

# ---- --batch ----
python3 - "$WORK/batch.jsonl" "$IMAGE" "$Q1" "$WORK/turns.jsonl" <<'EOF'
import json, sys
path, image, q, turns = sys.argv[1:]
context = json.loads(open(turns).readline())["context"]  # the first turn's prompt as ids
with open(path, "w") as f:
    f.write(json.dumps({"id": "first", "prompt": q, "images": [image]}) + "\n\n")
    f.write(json.dumps({"id": 2, "prompt": q, "images": ["tests/fixtures/shapes_scenes/"
                        "scene_336x336_00.png"], "max_new_tokens": 3}) + "\n")
    f.write(json.dumps({"id": 3, "prompt": q, "images": ["no/such.png"]}) + "\n")
    f.write(json.dumps({"prompt": q, "image": [image]}) + "\n")
    f.write("{not json\n")
    f.write(json.dumps({"prompt": "x" * (1 << 20)}) + "\n")
    f.write(json.dumps({"id": "last", "prompt": q, "images": [image]}) + "\n")
    f.write(json.dumps({"id": "ids", "input_ids": context, "images": [image]}) + "\n")
EOF
rc=0
"$RUN" "$M" --batch "$WORK/batch.jsonl" --threads 2 >"$WORK/batch.out" 2>"$WORK/batch.err" || rc=$?
same "--batch: one answer line per request, exit 1 when some failed" \
  "$(wc -l <"$WORK/batch.out") $rc" "8 1"
expect_in "--batch: stderr counts the failures" "4 of 8 requests failed" "$(cat "$WORK/batch.err")"
single=$("$RUN" "$M" --image tests/fixtures/shapes_scenes/scene_336x336_00.png -p "$Q1" -n 3 \
  --threads 2)
python3 - "$WORK/batch.out" "$single" <<'EOF' &&
import json, sys
a = [json.loads(line) for line in open(sys.argv[1])]
want = "A red square, a green triangle and a blue circle."
assert [x["id"] for x in a] == ["first", 2, 3, None, None, None, "last", "ids"], [x["id"] for x in a]
assert a[0]["text"] == want and a[6]["text"] == want, (a[0], a[6])
assert a[0]["stop"] == "eos" and a[0]["prompt_tokens"] == 289, a[0]
assert a[1]["text"] == sys.argv[2] and a[1]["generated_tokens"] == 3 and a[1]["stop"] == "length"
assert a[2]["line"] == 4 and "no/such.png" in a[2]["error"], a[2]
assert 'unknown key "image"' in a[3]["error"] and a[3]["line"] == 5, a[3]
assert "invalid JSON" in a[4]["error"] and a[4]["line"] == 6, a[4]
assert "longer than 1048576 bytes" in a[5]["error"] and a[5]["line"] == 7, a[5]
# the same prompt as token ids: the same answer, token for token
assert a[7]["text"] == want and a[7]["tokens"] == a[0]["tokens"] and a[0]["tokens"], (a[0], a[7])
assert a[7]["prompt_tokens"] == 289, a[7]
EOF
  ok "--batch: answers equal single runs (a prompt as text or as input_ids), each bad request names its fault and line" ||
  fail "--batch answers: $(cut -c1-300 "$WORK/batch.out")"
piped=$(head -1 "$WORK/batch.jsonl" | "$RUN" "$M" --batch - --threads 2 |
  python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["text"])')
same "--batch - reads stdin" "$piped" "A red square, a green triangle and a blue circle."
rc=0
"$RUN" "$M" --batch "$WORK/batch.jsonl" -p "$Q1" >/dev/null 2>"$WORK/err" || rc=$?
same "--batch with -p is a usage error" "$rc $(grep -c 'drop -p' "$WORK/err")" "2 1"

# the chat's controls, on the same artifact: Ctrl-C, /image, /clear, /exit, continued lines
if python3 "$(dirname "$0")/chat_controls.py" "$RUN" "$M" tests/fixtures/images/scene_336x336.png \
     >"$WORK/controls.log" 2>&1; then
  ok "chat controls: $(grep -c '^ok' "$WORK/controls.log") checks (tests/e2e/chat_controls.py)"
else
  cat "$WORK/controls.log"
  fail "chat controls (tests/e2e/chat_controls.py)"
fi

summary
