#!/bin/sh
# `tapegrad train` on two simulated hosts (scripts/mpi_two_hosts.sh: network namespaces joined by a veth
# pair, one rank each, talking TCP): it trains, the log counts two hosts, and rank 0's checkpoint resumes
# on one process. Exit 77 (skipped) where this machine cannot create the namespaces.
set -u
tapegrad=$1
source_dir=$2
work=$3
fail() { echo "two_hosts: $*" >&2; exit 1; }

rm -rf "$work" && mkdir -p "$work" || fail "cannot create $work"
status=0
"$source_dir/scripts/mpi_two_hosts.sh" --ranks-per-host 1 -- "$tapegrad" train --task majority --target-acc 0.99 \
  --steps 1000 --threads 1 --out "$work/run" --json >"$work/out.json" 2>"$work/err.txt" || status=$?
if [ "$status" = 77 ]; then cat "$work/err.txt" >&2; exit 77; fi
cat "$work/err.txt"
[ "$status" = 0 ] || fail "mpirun on two hosts exited with $status"
grep -q "x 2 ranks on 2 hosts = 128 per step" "$work/err.txt" || fail "the log does not count two hosts"
grep -q '"reached_target":true' "$work/out.json" || fail "did not reach 99%: $(cat "$work/out.json")"
"$tapegrad" train --resume "$work/run" --steps "$(($(sed 's/.*"steps":\([0-9]*\).*/\1/' "$work/out.json") + 10))" \
  2>"$work/resume.txt" || fail "resume on one process: $(cat "$work/resume.txt")"
grep -q "saved by 2 ranks" "$work/resume.txt" || fail "resume: $(cat "$work/resume.txt")"
echo "two_hosts: trained across two hosts and resumed on one process"
