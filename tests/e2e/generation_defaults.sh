#!/usr/bin/env bash
# Generation as transformers does it by default (issue 20): for each generation config of
# tests/fixtures/parity_generation/ (written by tests/oracle/make_generation_fixtures.py from
# transformers' model.generate() with that config as the checkpoint's generation_config.json),
# the tiny checkpoint compiled with that generation_config.json and run by vlmc-run with no
# sampling flag must print the ids transformers generated, on the cpu and on the ref backend.
# A config whose rules change the answer (the fixture's "greedy_without_rules" differs) is
# counted, so that the test shows it measures the rules and not plain greedy decoding.
#   usage: generation_defaults.sh VLMC VLMC_RUN
set -euo pipefail
VLMC=$1
RUN=$2
CKPT=tests/fixtures/parity/tiny-vocab512
FIXTURES=tests/fixtures/parity_generation
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/lib.sh"

[ -d "$FIXTURES" ] || { fail "no $FIXTURES (tests/oracle/make_generation_fixtures.py writes it)"; exit 1; }

# field FILE KEY: a field of an expected.json, lists as space-separated ids.
field() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))[sys.argv[2]]
if isinstance(v, list): print(" ".join(str(x) for x in v))
elif isinstance(v, (dict,)): print(json.dumps(v, indent=1))
else: print(v)
EOF
}

changed=0
for config_dir in "$FIXTURES"/*/; do
  config=$(basename "$config_dir")
  first=$(ls "$config_dir"*/expected.json | head -1)
  mkdir -p "$WORK/ckpt-$config"
  cp "$CKPT"/* "$WORK/ckpt-$config/"
  field "$first" generation_config >"$WORK/ckpt-$config/generation_config.json"
  "$VLMC" compile "$WORK/ckpt-$config" -o "$WORK/$config.vlmc" 2>/dev/null
  recorded=$("$VLMC" inspect "$WORK/$config.vlmc" | grep -m1 '^generation' || true)
  echo "$config: $(tr '\n' ' ' <<<"$recorded")"
  for expected in "$config_dir"*/expected.json; do
    case=$(basename "$(dirname "$expected")")
    ids=$(field "$expected" input_ids_file)
    n=$(field "$expected" max_new_tokens)
    images=()
    for image in $(field "$expected" images); do images+=(--image "$image"); done
    want=$(field "$expected" generated)
    greedy=$(field "$expected" greedy_without_rules)
    [ "$want" = "$greedy" ] || changed=$((changed + 1))
    for backend in cpu ref; do
      got=$("$RUN" "$WORK/$config.vlmc" --backend $backend --input-ids "$ids" "${images[@]}" \
        -n "$n" --threads 2)
      if same_tokens "$got" "$want"; then
        ok "$config/$case ($backend): vlmc-run's defaults print transformers' generate() ids"
      else
        fail "$config/$case ($backend): got '$got', transformers generated '$want'"
      fi
    done
  done
done
if [ "$changed" -gt 0 ]; then
  ok "$changed fixture case(s) where the config's rules change transformers' answer"
else
  fail "no fixture case where the generation config changes the answer: the test measures nothing"
fi
summary
