#!/usr/bin/python3
"""`make bench`: tapegrad against PyTorch on the same models, batch and optimizer, side by side.

Runs `tapegrad bench --json` (small and medium), then the PyTorch twin (bench/train_step_torch.py) for
each configuration under every setting PyTorch users reach for that this CPU can run: 1 and 2 threads x
OPENBLAS_CORETYPE unset, Haswell (with AVX2) and SkylakeX (with AVX-512), each in a fresh process (the
variable is read when OpenBLAS loads), keeping PyTorch's best. A setting that fails anyway is reported in
one line and skipped. Then small's speed-up on every core against one thread (`tapegrad bench --scaling`:
chunks on each alternated, the median ratio). Last, the peak resident memory of a `tapegrad train` run of
the medium model (validation included) against the twin's peak on the medium model. Ratios come from one run of each: the machine is
shared, so compare ratios, not absolute rates. docs/performance.md explains the columns.

    /usr/bin/python3 bench/compare.py path/to/tapegrad
"""
import json
import os
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TWIN = os.path.join(HERE, "train_step_torch.py")
CONFIGS = {  # the twin's flags (tapegrad train's names) for tapegrad bench's named configurations
    "small": dict(d_model=64, heads=4, ff=128, layers=2, context_length=32, batch_size=64, warmup=20, steps=200),
    "medium": dict(d_model=256, heads=8, ff=1024, layers=4, context_length=128, batch_size=32, warmup=3, steps=20),
}


def cpu_flags():
    """The CPU's feature flags (/proc/cpuinfo), empty where there is no such file."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def pytorch_settings(flags):
    """(threads, OPENBLAS_CORETYPE) pairs: a kernel set only where the CPU has its instructions (SkylakeX's
    AVX-512 kernels die of SIGILL on a CPU without AVX-512)."""
    coretypes = [None]
    if {"avx2", "fma"} <= flags:
        coretypes.append("Haswell")
    if "avx512f" in flags:
        coretypes.append("SkylakeX")
    return [(threads, coretype) for threads in (1, 2) for coretype in coretypes]


def run(cmd, env=None):
    """Runs cmd; returns its standard output."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def run_with_peak(cmd, env=None):
    """Runs cmd and returns its peak resident set in MiB (from wait4's rusage: that child alone)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{proc.stderr.read().decode()}")
    return usage.ru_maxrss / 1024.0


def twin_flags(config):
    return [x for k, v in CONFIGS[config].items() for x in ("--" + k.replace("_", "-"), str(v))]


def describe_exit(code):
    """A child's exit code as words: a signal by name (SIGILL: an instruction this CPU lacks)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def pytorch_best(config, settings):
    """PyTorch's fastest setting on config, or None when every setting failed (each failure one line)."""
    best = None
    for threads, coretype in settings:
        env = dict(os.environ)
        env.pop("OPENBLAS_CORETYPE", None)
        if coretype:
            env["OPENBLAS_CORETYPE"] = coretype
        steps = CONFIGS[config]["steps"]
        flags = twin_flags(config) + ["--threads", str(threads), "--repeats", "5" if steps % 5 == 0 else "1"]
        setting = f"{threads} thread{'s' if threads > 1 else ''}, OPENBLAS_CORETYPE={coretype or 'unset'}"
        proc = subprocess.run(["/usr/bin/python3", TWIN] + flags, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [""])[-1]
            print(f"bench: PyTorch {config} at {setting} skipped: {describe_exit(proc.returncode)} {last}".rstrip())
            continue
        fields = dict(kv.split("=") for kv in proc.stdout.strip().splitlines()[-1].split()[1:])
        result = {"steps_per_second": float(fields["steps_per_s"]), "peak_rss_mib": float(fields["peak_rss_mib"]),
                  "setting": setting}
        if best is None or result["steps_per_second"] > best["steps_per_second"]:
            best = result
    return best


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tapegrad = sys.argv[1]
    try:
        subprocess.run(["/usr/bin/python3", "-c", "import torch"], check=True, capture_output=True)
        have_torch = True
    except (subprocess.CalledProcessError, FileNotFoundError):
        have_torch = False
        print("bench: /usr/bin/python3 has no torch (Debian's python3-torch): tapegrad's figures only")

    out = run([tapegrad, "bench", "--config", "small,medium", "--json"])
    ours = {r["config"]: r for r in map(json.loads, out.strip().splitlines())}
    first = next(iter(ours.values()))
    print(f"CPU: {first['cpu']}, {first['vector_bits']}-bit vectors ({first['instruction_set']})")
    for r in ours.values():
        print(f"tapegrad {r['config']}: {r['steps_per_second']:.2f} steps/s, {r['gflops']:.0f} GFLOP/s = "
              f"{100 * r['model_flop_utilisation']:.1f}% of the measured FMA peak ({r['peak_gflops']:.0f} GFLOP/s), "
              f"{r['threads']} threads, kernels {r['blas_kernels']}, peak RSS {r['peak_rss_mib']:.0f} MiB, "
              f"{r['heap_allocations_per_step']} heap allocations per step")
        if r["blas_advice"]:
            print(f"  note: {r['blas_advice']}")

    scaling = json.loads(run([tapegrad, "bench", "--config", "small", "--scaling", "--json"]).strip().splitlines()[-1])
    print(f"tapegrad small on {scaling['threads']} threads against 1: {scaling['thread_scaling']:.2f}x "
          f"(the median of alternated chunk pairs)")

    with tempfile.TemporaryDirectory() as run_dir:
        train_rss = run_with_peak([tapegrad, "train", "--task", "majority", "--min-len", "128", "--max-len", "128",
                                   "--d-model", "256", "--heads", "8", "--ff", "1024", "--layers", "4",
                                   "--batch-size", "32", "--steps", "12", "--eval-every", "12",
                                   "--out", os.path.join(run_dir, "run"), "--overwrite", "--threads", "0"])
    print(f"tapegrad train, medium model on T = 128 (12 steps and a validation): peak RSS {train_rss:.0f} MiB")
    if not have_torch:
        return

    settings = pytorch_settings(cpu_flags())
    theirs = {config: pytorch_best(config, settings) for config in CONFIGS}  # a skipped setting: one line each
    print()
    print(f"{'config':8} {'tapegrad steps/s':>17} {'PyTorch best':>13} {'ratio':>6}  {'MFU':>6}  PyTorch's best setting")
    for config in CONFIGS:
        r, t = ours[config], theirs[config]
        if t is None:
            print(f"{config:8} {r['steps_per_second']:17.2f} {'(failed)':>13} {'':>6}  "
                  f"{100 * r['model_flop_utilisation']:5.1f}%  every PyTorch setting failed")
            continue
        print(f"{config:8} {r['steps_per_second']:17.2f} {t['steps_per_second']:13.2f} "
              f"{r['steps_per_second'] / t['steps_per_second']:5.2f}x  {100 * r['model_flop_utilisation']:5.1f}%  "
              f"{t['setting']}")
    if theirs["medium"] is not None:
        torch_rss = theirs["medium"]["peak_rss_mib"]
        print(f"{'memory':8} tapegrad train (medium) {train_rss:.0f} MiB vs PyTorch medium step {torch_rss:.0f} MiB: "
              f"{100 * train_rss / torch_rss:.0f}%")


if __name__ == "__main__":
    main()
