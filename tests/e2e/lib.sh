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
