#!/usr/bin/env bash
# The JSON outputs for scripts (issue 20, docs/cli.md): `vlmc inspect --json [--verify]`,
# `vlmc diff-taps --json` and `vlmc-run --json` (--stats as one JSON line per answer). Each
# parses as JSON, says what the text form says (the same sections, checks, first divergence,
# token counts), keeps the text form's exit status, and stays JSON when a check fails.
#   usage: json_outputs.sh VLMC VLMC_RUN
set -euo pipefail
VLMC=$1
RUN=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"

# jq-like: py 'EXPR' < JSON prints eval(EXPR) with the document as `d`.
py() { python3 -c "import json, sys; d = json.load(sys.stdin); print($1)"; }

ART=$WORK/s.vlmc
compile_or_stop "$VLMC" assets/shapes-vl "$ART" ref,cpu

# ---- vlmc inspect --json ----
rc=0
"$VLMC" inspect "$ART" --json --verify >"$WORK/i.json" || rc=$?
same "inspect --json --verify exits 0 on a sound artifact" "$rc" 0
same "inspect --json: the family" "$(py 'd["model"]["family"]' <"$WORK/i.json")" qwen2_5_vl
same "inspect --json: targets as a list" "$(py 'd["targets"]' <"$WORK/i.json")" "['ref', 'cpu']"
text=$("$VLMC" inspect "$ART")
want=$(awk '/^sections/ {on=1; next} on && /^  [a-z]/ && !/^  name/ {print $1} /^program/ {on=0}' <<<"$text" | tr '\n' ' ')
same "inspect --json: the sections of the text report, in order" \
  "$(py '" ".join(s["name"] for s in d["sections"]) + " "' <"$WORK/i.json")" "$want"
same "inspect --json: the program's functions" \
  "$(py '" ".join(f["name"] for f in d["program"]["functions"])' <"$WORK/i.json")" \
  "encode_image prefill decode"
same "inspect --json: cpu kernels, every one serving a dispatch" \
  "$(py 'all(k["dispatches"] > 0 for k in d["kernels"]["cpu"]["kernels"])' <"$WORK/i.json")" True
same "inspect --json: no vulkan or metal code (null)" \
  "$(py 'd["kernels"]["vulkan"], d["kernels"]["metal"]' <"$WORK/i.json")" "None None"
same "inspect --json: the cpu backend's check" \
  "$(py 'd["backend_checks"]' <"$WORK/i.json")" "[{'backend': 'cpu', 'loadable': True}]"
same "inspect --json: parameters as the text's line" \
  "$(py '"parameters: %d tensors, %d elements, %s" % (d["parameters"]["tensors"], d["parameters"]["elements"], d["parameters"]["storage"])' <"$WORK/i.json")" \
  "$(grep '^parameters:' <<<"$text")"
same "inspect --json --verify: the verdict" "$(py 'd["verify"]' <"$WORK/i.json")" "{'ok': True}"
# a flipped byte in the parameters (checked on use, so the artifact still opens): the
# verification fails, the report stays JSON and names the failure, the exit status is 1
cp "$ART" "$WORK/bad.vlmc"
off=$(py '[s for s in d["sections"] if s["name"] == "params"][0]["offset"] + 1000' <"$WORK/i.json")
printf '\x5a' | dd of="$WORK/bad.vlmc" bs=1 seek="$off" conv=notrunc status=none
rc=0
"$VLMC" inspect "$WORK/bad.vlmc" --json --verify >"$WORK/bad.json" 2>"$WORK/bad.err" || rc=$?
same "inspect --json --verify of a corrupted artifact exits 1" "$rc" 1
same "... and its report says so, as JSON" "$(py 'd["verify"]["ok"]' <"$WORK/bad.json")" False
expect_in "... naming the checksum" "checksum" "$(py 'd["verify"]["error"]' <"$WORK/bad.json")"

# ---- vlmc diff-taps --json ----
A=tests/fixtures/parity/img336
B=tests/fixtures/parity_families/qwen2_vl/img336
rc=0
"$VLMC" diff-taps "$A" "$A" --json >"$WORK/d0.json" || rc=$?
same "diff-taps --json of a tap set with itself: exit 0" "$rc" 0
same "... no divergence (null)" "$(py 'd["first_divergence"]' <"$WORK/d0.json")" None
same "... every tap ok" "$(py 'set(t["verdict"] for t in d["taps"])' <"$WORK/d0.json")" "{'ok'}"
rc=0
"$VLMC" diff-taps "$A" "$B" --json >"$WORK/d1.json" || rc=$?
same "diff-taps --json of two families' taps: exit 1" "$rc" 1
text=$("$VLMC" diff-taps "$A" "$B" || true)
same "... the first divergence of the table" "$(py 'd["first_divergence"]' <"$WORK/d1.json")" \
  "$(sed -n 's/^first divergence: //p' <<<"$text")"
same "... the taps of the table, in its order, with its verdicts" \
  "$(py '"\n".join(t["name"] + " " + t["verdict"].split()[0].upper() for t in d["taps"])' <"$WORK/d1.json")" \
  "$(awk 'NR > 1 && !/^first/ {v = $NF; if ($0 ~ /only in/) v = "ONLY"; else if ($0 ~ /DIVERGES/) v = "DIVERGES"; else v = "OK"; print $1, v}' <<<"$text")"

# ---- vlmc-run --json ----
IMAGE=tests/fixtures/test_image_shapes.png
"$RUN" "$ART" --quiet -n 5 --ignore-eos --image "$IMAGE" -p "Describe." --json >"$WORK/out.txt" 2>"$WORK/stats.txt"
same "vlmc-run --json: one JSON line on stderr" "$(wc -l <"$WORK/stats.txt")" 1
same "... its token counts" \
  "$(py 'd["generated_tokens"], d["decode_tokens"], d["stopped_by"]' <"$WORK/stats.txt")" \
  "5 4 token limit"
same "... the prompt's tokens are the context's" \
  "$(py 'd["prompt_tokens"] == d["context_tokens"] > 0' <"$WORK/stats.txt")" True
same "... the answer still on stdout" "$(wc -c <"$WORK/out.txt" | tr -d ' ')" \
  "$(wc -c < <("$RUN" "$ART" --quiet -n 5 --ignore-eos --image "$IMAGE" -p "Describe.") | tr -d ' ')"
printf 'Hello.\nAnd again.\n' | "$RUN" "$ART" --quiet -n 3 -i --json >/dev/null 2>"$WORK/chat.txt"
same "vlmc-run -i --json: a line per turn, numbered" \
  "$(grep '^{' "$WORK/chat.txt" | python3 -c 'import json, sys; print([json.loads(l)["turn"] for l in sys.stdin])')" \
  "[1, 2]"
"$RUN" "$ART" --load-only --json 2>"$WORK/load.txt"
same "vlmc-run --load-only --json: backend and load time" \
  "$(py 'd["backend"], d["load_ms"] > 0' <"$WORK/load.txt")" "cpu True"
summary
