#!/bin/sh
# my-tapegrad with the user's RMSNorm, from the command line: train the majority task for 100 steps,
# resume the run until 99% validation accuracy, check config.json names the component, evaluate and
# predict from the checkpoint, and run the gradient checks, which list the user's cases beside the
# built-in ones.
set -eu
program=$1
run=$2
fail() { echo "train_with_rmsnorm: $*" >&2; exit 1; }

"$program" train --task majority --norm rmsnorm --norm-eps 0.0001 --target-acc 0.99 --steps 100 --out "$run" --overwrite
grep -q '"norm": "rmsnorm"' "$run/config.json" || fail "config.json does not name the rmsnorm component"
# The variant's own setting, from its declaration: recorded under the component, refused out of its range.
has_eps() { tr -d ' \n' < "$1/config.json" | grep -q '"norm":{"eps":0.0001}' || fail "$1/config.json lacks eps 0.0001"; }
has_eps "$run"
if "$program" train --task majority --norm rmsnorm --norm-eps 0 --out "$run.bad" 2> "$run.bad.txt"; then fail "--norm-eps 0 was accepted"; fi
grep -q -- '--norm-eps must be a finite number in (0, 1], got 0' "$run.bad.txt" || fail "--norm-eps 0: $(cat "$run.bad.txt")"
"$program" train --help | grep -q -- '--norm-eps FLOAT=1e-05 *--norm layernorm or rmsnorm' || fail "--help does not list --norm-eps"
"$program" train --resume "$run" --steps 3000 --json > "$run.json"
has_eps "$run"  # the resumed run's checkpoints keep it
grep -q '"reached_target":true' "$run.json" || fail "did not reach 99%: $(cat "$run.json")"
"$program" eval --checkpoint "$run" --task majority --json > "$run.eval.json"
grep -q '"accuracy":0.99' "$run.eval.json" || grep -q '"accuracy":1.0' "$run.eval.json" || fail "eval: $(cat "$run.eval.json")"
"$program" predict --checkpoint "$run" --text "t1 t1 t1 t2" --json | grep -q '"label":"t1"' || fail "predict did not say t1"
"$program" gradcheck --filter custom/ > "$run.gradcheck.txt"
grep -q '^3 passed, 0 failed' "$run.gradcheck.txt" || fail "gradcheck: $(cat "$run.gradcheck.txt")"
cat "$run.json" "$run.gradcheck.txt"
# The checkpoint in PyTorch, when /usr/bin/python3 has it (Debian's python3-torch); skipped otherwise.
if [ -x /usr/bin/python3 ]; then
  status=0
  /usr/bin/python3 "$(dirname "$0")/load_in_pytorch.py" "$run" "$program" "t1 t1 t1 t2" "t3 t5 t5 t0 t5" "t7" || status=$?
  [ "$status" = 0 ] || [ "$status" = 77 ] || fail "PyTorch disagrees with $program predict"
fi
