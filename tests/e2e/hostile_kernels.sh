#!/usr/bin/env bash
# Hostile native code in a resealed artifact (issue 12): `vlmc reseal` replaces the kernels.cpu
# section of a real tiny artifact and recomputes every checksum, as anyone who edits the file
# can; then vlmc-run and `vlmc inspect --verify` must both refuse it by name, and none of its
# code may run (each planted object writes a marker file if any of its code runs).
#   usage: hostile_kernels.sh VLMC VLMC_RUN
set -euo pipefail
VLMC=$1
RUN=$2
CC=${CC:-cc}
CKPT=tests/fixtures/parity/tiny-vocab512
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/lib.sh"

"$VLMC" compile "$CKPT" -o "$WORK/tiny.vlmc" 2>/dev/null
"$VLMC" reseal "$WORK/tiny.vlmc" --extract kernels.cpu="$WORK/kernels.so" \
  --extract kernels.cpu.json="$WORK/table.json"
fixture_field text_only input_ids >"$WORK/ids.json"
MARK=$WORK/ran
# The table's entry points, so that a planted object defines every symbol the runtime asks for.
symbols=$(python3 -c 'import json,sys; print(" ".join(k["symbol"] for k in json.load(open(sys.argv[1]))["kernels"]))' "$WORK/table.json")

# plant NAME C_BODY EXTRA_C [CFLAGS...]: a shared object whose kernels all run C_BODY, with
# EXTRA_C (more definitions) after them.
plant() {
  local name=$1 body=$2 extra=$3 src=$WORK/$1.c
  shift 3
  {
    echo '#include <stdio.h>'
    echo '#include <stdlib.h>'
    echo "static void mark(void) { FILE *f = fopen(\"$MARK\", \"w\"); if (f) fclose(f); }"
    for s in $symbols; do echo "void $s(void **b, const long *c, long lo, long hi) { $body }"; done
    echo "$extra"
  } >"$src"
  "$CC" -shared -fPIC -O1 -o "$WORK/$name.so" "$src" "$@"
}
plant constructor 'mark();' '__attribute__((constructor)) static void init(void) { mark(); }'
plant libc_abort 'mark(); abort();' '' -nostartfiles
plant libc_system 'mark(); (void)system("true");' '' -nostartfiles
cp "$(find /usr/lib /lib -name 'libm.so.6' 2>/dev/null | head -1)" "$WORK/foreign.so"
head -c 4000 "$WORK/kernels.so" >"$WORK/truncated.so"
head -c 200 "$WORK/kernels.so" >"$WORK/truncated_header.so"

if "$RUN" "$WORK/tiny.vlmc" --input-ids "$WORK/ids.json" -n 1 --ids >/dev/null 2>&1 &&
   "$VLMC" inspect --verify "$WORK/tiny.vlmc" >/dev/null 2>&1; then
  ok "the untouched artifact runs and verifies"
else
  fail "the untouched artifact does not run or verify"
fi

for case in constructor libc_abort libc_system foreign truncated truncated_header; do
  rm -f "$MARK"
  bad=$WORK/$case.vlmc
  "$VLMC" reseal "$WORK/tiny.vlmc" -o "$bad" --replace kernels.cpu="$WORK/$case.so"
  rc=0
  out=$("$RUN" "$bad" --input-ids "$WORK/ids.json" -n 1 --ids 2>&1) || rc=$?
  if [ "$rc" -ne 0 ] && grep -q "kernels.cpu" <<<"$out" && ! grep -qi "sanitizer\|segmentation" <<<"$out"; then
    ok "vlmc-run refuses $case: $(tail -1 <<<"$out")"
  else
    fail "vlmc-run on $case: exit $rc: $out"
  fi
  rc=0
  out=$("$VLMC" inspect --verify "$bad" 2>&1) || rc=$?
  if [ "$rc" -ne 0 ] && grep -q "kernels.cpu" <<<"$out"; then
    ok "inspect --verify refuses $case"
  else
    fail "inspect --verify on $case: exit $rc: $(tail -3 <<<"$out")"
  fi
  if [ -e "$MARK" ]; then fail "code from the planted $case object ran"; else ok "no code of $case ran"; fi
done

summary
