#!/bin/bash
# `make bench`'s peers from PyPI: PyTorch 2 (eager and torch.compile) and JAX with optax, in a virtual
# environment of their own (build/bench-venv, or $BENCH_VENV), made from the `python3` first on PATH: Debian's
# /usr/bin/python3 keeps its python3-torch 1.13 for the existing row, and may have no venv or pip at all.
#
# Each peer is installed once: a stamp file per peer in the environment says it is there, so a later run
# costs a file test. A peer that cannot be installed prints one line and the others go on; it is tried
# again on the next run (nothing stamps a failure). Wheels are downloaded into a folder first, so that the
# size of what came from the network can be printed, then installed from it and the folder removed.
#
#   bench/peers/install.sh            # then: build/bench-venv/bin/python bench/train_step_jax.py ...
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${BENCH_VENV:-$root/build/bench-venv}
# PyTorch's own index serves CPU-only wheels (about a fifth of PyPI's, which bring the CUDA libraries);
# where it cannot be reached, PyPI's torch runs on the CPU all the same.
torch_cpu_index=https://download.pytorch.org/whl/cpu

say() { echo "bench peers: $*"; }

make_venv() {
  [ -x "$venv/bin/python" ] && return 0
  local python
  python=$(command -v python3) || { say "no python3 on PATH: no peers beyond /usr/bin/python3's torch"; return 1; }
  if ! "$python" -m venv "$venv" >/dev/null 2>&1; then
    say "$python -m venv failed (no venv module?): no peers beyond /usr/bin/python3's torch"
    rm -rf "$venv"
    return 1
  fi
  say "made $venv from $python ($("$venv/bin/python" --version 2>&1))"
}

# MiB of the wheels in a folder, and the three largest by name, in one line.
describe_wheels() {
  local folder=$1
  local total
  total=$(du -sm "$folder" | cut -f1)
  local largest
  largest=$(ls -S "$folder" | head -3 | while read -r f; do
    printf '%s %s MB, ' "${f%%-[0-9]*}" "$(du -m "$folder/$f" | cut -f1)"
  done)
  echo "$(ls "$folder" | wc -l) wheels, $total MB (largest: ${largest%, })"
}

# install_peer NAME [pip download arguments...]: downloads, installs, stamps; one line either way.
install_peer() {
  local name=$1
  shift
  local stamp="$venv/.installed-$name"
  [ -f "$stamp" ] && return 0
  local wheels="$venv/wheels-$name"
  rm -rf "$wheels"
  local log="$venv/install-$name.log"
  if ! "$venv/bin/pip" download --quiet --dest "$wheels" "$@" >"$log" 2>&1; then
    say "$name not installed: pip download failed ($(grep -m1 -E 'ERROR|error' "$log" || tail -1 "$log")); see $log"
    rm -rf "$wheels"
    return 1
  fi
  local what
  what=$(describe_wheels "$wheels")
  if ! "$venv/bin/pip" install --quiet --no-index --find-links "$wheels" "$@" >>"$log" 2>&1; then
    say "$name not installed: pip install failed ($(grep -m1 -E 'ERROR|error' "$log" || tail -1 "$log")); see $log"
    rm -rf "$wheels"
    return 1
  fi
  rm -rf "$wheels"
  echo "$what" >"$stamp"
  say "$name installed: downloaded $what"
}

# --index-url replaces PyPI, so the CPU index must serve torch's dependencies too (it does).
install_torch() {
  [ -f "$venv/.installed-torch" ] && return 0
  if "$venv/bin/pip" download --quiet --no-deps --timeout 15 --retries 0 --dest "$venv/probe" \
      --index-url "$torch_cpu_index" typing-extensions >/dev/null 2>&1; then
    say "torch from PyTorch's CPU index ($torch_cpu_index)"
    install_peer torch --index-url "$torch_cpu_index" torch
  else
    say "PyTorch's CPU index ($torch_cpu_index) unreachable: torch from PyPI (CUDA libraries included, unused)"
    install_peer torch torch
  fi
  rm -rf "$venv/probe"
}

make_venv || exit 0
install_torch
install_peer jax 'jax[cpu]' optax
for name in torch jax; do
  # the installed version from the package's metadata: importing torch would cost seconds a run
  [ -f "$venv/.installed-$name" ] &&
    say "$name $("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$name'))" 2>&1 | tail -1) ready in $venv"
done
exit 0
