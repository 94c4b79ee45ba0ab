"""`make bench`'s peers: the frameworks `tapegrad bench` is set against, each a twin script run by an interpreter.

- PyTorch 1.13: Debian's python3-torch under /usr/bin/python3 (bench/train_step_torch.py, eager); its products
  run in OpenBLAS, so its OPENBLAS_CORETYPE settings are tried too.
- PyTorch 2 eager and PyTorch 2 compiled (torch.compile, inductor): the same twin under build/bench-venv's
  python (bench/peers/install.sh), whose PyPI torch does its products in MKL.
- JAX jit: bench/train_step_jax.py under the same python.
A peer whose interpreter cannot import its framework (or imports too old a one) is missing: one line says so
and its column shows `-`. Each run of a twin is a process of its own (a thread count and a kernel set are read
when the libraries load), and a run that fails or exceeds RUN_TIMEOUT_S is one line too.
"""
import os
import signal
import subprocess
from dataclasses import dataclass

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_TWIN = os.path.join(BENCH, "train_step_torch.py")
JAX_TWIN = os.path.join(BENCH, "train_step_jax.py")
# A long step of a peer takes seconds and a cold torch.compile about a minute here; a run past 20 minutes is
# a hung one, not a slow one.
RUN_TIMEOUT_S = 1200


@dataclass
class Peer:
    name: str              # the table's column
    python: str            # the interpreter that runs the twin
    twin: str              # the twin script
    module: str            # the framework it imports
    min_major: int = 0     # a smaller major version is not this peer (PyTorch 2's peers refuse a 1.x)
    flags: tuple = ()      # the twin's flags that make it this peer (--compile)
    coretypes: bool = False  # OpenBLAS kernel sets tried as settings
    version: str = ""      # found by probe()
    missing: str = ""      # why the peer cannot run, when it cannot


def describe_exit(code):
    """A child's exit code as words: a signal by name (SIGILL: an instruction this CPU lacks)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def last_line(text):
    return (text.strip().splitlines() or [""])[-1]


def probe(peer):
    """Sets peer.version, or peer.missing when its interpreter cannot import its framework at min_major."""
    try:
        proc = subprocess.run([peer.python, "-c", f"import {peer.module}; print({peer.module}.__version__)"],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        peer.missing = f"{peer.python}: {e}"
        return peer
    if proc.returncode != 0:
        peer.missing = f"{peer.python} cannot import {peer.module} ({last_line(proc.stderr)})"
    else:
        peer.version = last_line(proc.stdout)
        major = int(peer.version.split(".")[0]) if peer.version.split(".")[0].isdigit() else 0
        if major < peer.min_major:
            peer.missing = f"{peer.python} has {peer.module} {peer.version}, not {peer.min_major}.x"
    return peer


def all_peers(venv):
    """Every peer, probed; a missing one is printed in one line (install.sh makes venv)."""
    venv_python = os.path.join(venv, "bin", "python")
    peers = [Peer("PyTorch 1.13", "/usr/bin/python3", TORCH_TWIN, "torch", coretypes=True),
             Peer("PyTorch 2 eager", venv_python, TORCH_TWIN, "torch", min_major=2),
             Peer("PyTorch 2 compiled", venv_python, TORCH_TWIN, "torch", min_major=2, flags=("--compile",)),
             Peer("JAX jit", venv_python, JAX_TWIN, "jax")]
    for peer in peers:
        probe(peer)
        if peer.missing:
            print(f"bench: peer {peer.name} missing: {peer.missing}")
        else:
            print(f"bench: peer {peer.name}: {peer.module} {peer.version} ({peer.python})")
    return peers


def thread_counts():
    """1 thread and every core: which wins depends on the model and on the neighbours of a shared machine."""
    return sorted({1, os.cpu_count() or 1})


def settings_of(peer, coretypes):
    """(threads, OPENBLAS_CORETYPE or None) pairs; coretypes only for a peer whose products run in OpenBLAS."""
    kernel_sets = coretypes if peer.coretypes else [None]
    return [(threads, coretype) for threads in thread_counts() for coretype in kernel_sets]


def describe_setting(threads, coretype, peer):
    setting = f"{threads} thread{'s' if threads > 1 else ''}"
    return setting + (f", OPENBLAS_CORETYPE={coretype or 'unset'}" if peer.coretypes else "")


def run_twin(peer, flags, threads, coretype):
    """One run of the peer's twin: its RESULT fields (floats) and the setting, or an error string."""
    env = dict(os.environ)
    if peer.coretypes:
        env.pop("OPENBLAS_CORETYPE", None)
        if coretype:
            env["OPENBLAS_CORETYPE"] = coretype
    cmd = [peer.python, peer.twin] + list(peer.flags) + flags + ["--threads", str(threads)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"over {RUN_TIMEOUT_S} s"
    result_lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not result_lines:
        return f"{describe_exit(proc.returncode)} {last_line(proc.stderr)}".rstrip()
    fields = {k: float(v) for k, v in (kv.split("=") for kv in result_lines[-1].split()[1:])}
    fields.update(threads=threads, coretype=coretype, setting=describe_setting(threads, coretype, peer))
    return fields


def best_run(peer, what, flags, settings):
    """The peer's fastest run over settings, or None; the settings that failed are one line."""
    best, failures = None, []
    for threads, coretype in settings:
        result = run_twin(peer, flags, threads, coretype)
        if isinstance(result, str):
            failures.append(f"{describe_setting(threads, coretype, peer)}: {result}")
        elif best is None or result["steps_per_s"] > best["steps_per_s"]:
            best = result
    if failures:
        print(f"bench: {peer.name} {what}: {'failed' if best is None else 'skipped'} " + "; ".join(failures))
    return best
