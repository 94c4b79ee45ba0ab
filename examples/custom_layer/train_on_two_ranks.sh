#!/bin/sh
# my-tapegrad is a full tapegrad, data parallelism included: `mpirun -np 2 my-tapegrad train --norm rmsnorm`
# trains on two ranks (docs/distributed.md), and the checkpoint names the user's component.
set -eu
mpirun=$1
program=$2
run=$3
fail() { echo "train_on_two_ranks: $*" >&2; exit 1; }

# As root (CI) mpirun wants the two ALLOW variables, and more ranks than cores the third. In a tapegrad built
# with AddressSanitizer (make test-asan) LeakSanitizer would report OpenMPI's own process-lifetime
# allocations, which it never frees: memory errors are still checked.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  "$mpirun" -np 2 "$program" train --task majority --norm rmsnorm --target-acc 0.99 --steps 1000 --out "$run" \
  --overwrite --json > "$run.json"
grep -q '"ranks":2' "$run.json" || fail "not two ranks: $(cat "$run.json")"
grep -q '"reached_target":true' "$run.json" || fail "did not reach 99%: $(cat "$run.json")"
grep -q '"norm": "rmsnorm"' "$run/config.json" || fail "config.json does not name the rmsnorm component"
cat "$run.json"
