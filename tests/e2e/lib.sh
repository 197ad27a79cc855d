# Shared by the e2e scripts (sourced): counting checks and reading the parity fixtures.
passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
same() { # WHAT GOT WANT
  if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: got '$2', expected '$3'"; fi
}
expect_in() { # WHAT NEEDLE TEXT
  if grep -qF -- "$2" <<<"$3"; then ok "$1"; else fail "$1: '$2' not in: $3"; fi
}
summary() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# fixture_field CASE KEY: a field of tests/fixtures/parity/CASE/expected.json; input_ids as a
# JSON list (what --input-ids reads), the other lists space-separated.
fixture_field() {
  python3 - "tests/fixtures/parity/$1/expected.json" "$2" <<'PY'
import json, sys
value = json.load(open(sys.argv[1]))[sys.argv[2]]
print(json.dumps(value) if sys.argv[2] == "input_ids" else " ".join(map(str, value)))
PY
}

# same_tokens GOT WANT: vlmc-run stops at the tiny model's eos id (1), which transformers'
# fixtures generate past; otherwise the lists must be equal.
same_tokens() {
  [ "$1" = "$2" ] || [[ "$2 " == "$1 "* && "$1" == *" 1" ]]
}

# compile_or_stop VLMC CKPT OUT TARGETS [ARGS...]: `vlmc compile CKPT -o OUT --target TARGETS
# ARGS`, counted as a check; a failed compile ends the script (nothing after it can run).
compile_or_stop() {
  local vlmc=$1 ckpt=$2 out=$3 targets=$4
  shift 4
  if "$vlmc" compile "$ckpt" -o "$out" --target "$targets" "$@" >"$out.log" 2>&1; then
    ok "compile --target $targets${*:+ $*}"
  else
    fail "compile: $(tail -3 "$out.log")"
    summary
    exit 1
  fi
}

# tap_names DIR: the stage names in DIR/taps.safetensors, space-separated and sorted.
tap_names() {
  python3 - "$1/taps.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
print(" ".join(sorted(k for k in json.loads(f.read(n)) if k != "__metadata__")))
PY
}
