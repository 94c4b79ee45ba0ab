#!/usr/bin/python3
"""`make bench`: tapegrad against PyTorch on the same models, batch and optimizer, side by side.

Runs, for each configuration (small, medium, long and lm), `tapegrad bench --json` (a process each), then the
PyTorch twin (bench/train_step_torch.py), then tapegrad once more: the host's speed drifts by tens of percent
within minutes, so tapegrad's runs bracket PyTorch's and its figure is the mean of the two (both printed).
The twin runs small and medium under every setting PyTorch users reach for that this CPU
can run: 1 and 2 threads x OPENBLAS_CORETYPE unset, Haswell (with AVX2) and SkylakeX (with AVX-512), each in
a fresh process (the variable is read when OpenBLAS loads), keeping PyTorch's best; long, whose PyTorch step
takes seconds, and lm (the character language model, whose training tokens/s are printed too), only on 1
and 2 threads at medium's best OPENBLAS_CORETYPE (see long_settings). A setting that fails anyway is
reported in one line and skipped. Then small's speed-up on every core against one thread (`tapegrad bench
--scaling`: chunks on each alternated, the median ratio). Last, the peak resident memory of `tapegrad train`
runs of the medium and long models (validation included) against the twin's peak on the same models. Ratios
come from one run of each: the machine is shared, so compare ratios, not absolute rates.
docs/performance.md explains the columns.

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
    # Fewer steps than tapegrad's 2 + 50: PyTorch's long step takes about 5 s on 2 cores (the (B·H, T, T)
    # scores, softmax and masks of T = 2048), so 5 one-step chunks keep a setting to about half a minute.
    "long": dict(d_model=256, heads=4, ff=1024, layers=2, context_length=2048, batch_size=2, warmup=1, steps=5),
    # The language model (pre-LN, GELU, causal, the loss at every position) on random windows. PyTorch's
    # step took 2.7 s on 2 busy Zen 3 cores (tapegrad's 1.1 s): 1 warm-up and 10 timed steps on each of two
    # settings, with tapegrad's 3 + 30, keep the lm row to about a minute and a half.
    "lm": dict(model="lm", vocab=96, d_model=128, heads=4, ff=512, layers=4, context_length=128, batch_size=32,
               warmup=1, steps=10),
}
# Settings limited as long's (long_settings): their PyTorch steps take seconds, so six settings would add minutes.
FEW_SETTINGS = ("long", "lm")
# The `tapegrad train` runs whose peak memory is set against the twin's (the twin's peak is its training step):
# a few steps and one validation on sequences of exactly the configuration's T, dropout 0 as in the twin
# (train's default 0.1 keeps a mask and a dropped copy of three tensors a layer: 45 MiB more on long). long's
# validation is 16 examples (--valid-size): the task's default 2000 would take minutes at T = 2048.
TRAIN_RUNS = {
    "medium": ["--min-len", "128", "--max-len", "128", "--d-model", "256", "--heads", "8", "--ff", "1024",
               "--layers", "4", "--batch-size", "32", "--steps", "12", "--eval-every", "12", "--dropout", "0"],
    "long": ["--min-len", "2048", "--max-len", "2048", "--d-model", "256", "--heads", "4", "--ff", "1024",
             "--layers", "2", "--batch-size", "2", "--steps", "4", "--eval-every", "4", "--valid-size", "16",
             "--dropout", "0"],
}
TRAIN_RUN_WHAT = {"medium": "12 steps and a validation", "long": "4 steps and a validation of 16 examples"}


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


def long_settings(settings, medium_best):
    """PyTorch's settings for long: 1 and 2 threads at the OPENBLAS_CORETYPE of medium's best setting (every
    setting when medium had none). A long step takes 3 to 5 s, so six settings would add three minutes to
    `make bench` and two add one. On 2 cores of a Zen 5 EPYC, quiet, 1 warm-up and 5 steps: 2 threads ran
    0.295 steps/s with OPENBLAS_CORETYPE unset and 0.296 with SkylakeX, 1 thread 0.244 and 0.195. The thread
    count moves long more than the kernel set, which made no difference on 2 threads, the faster; and which
    thread count wins is not medium's (on a loaded machine 1 thread won long), so both are tried. lm takes
    the same two settings, for the same reason: its PyTorch step takes seconds too."""
    if medium_best is None:
        return settings
    coretype = medium_best["coretype"]
    return [(threads, coretype) for threads in (1, 2) if (threads, coretype) in settings]


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
                  "setting": setting, "coretype": coretype}
        if best is None or result["steps_per_second"] > best["steps_per_second"]:
            best = result
    return best


def bracketed(runs):
    """One figure from tapegrad's runs of a configuration (`tapegrad bench --json` lines): the first's fields,
    with steps/s, GFLOP/s, MFU and tokens/s the mean of the runs', and every run's steps/s in "runs"."""
    r = dict(runs[0])
    for key in ("steps_per_second", "gflops", "model_flop_utilisation", "tokens_per_second"):
        if key in r:
            r[key] = sum(x[key] for x in runs) / len(runs)
    r["runs"] = [x["steps_per_second"] for x in runs]
    return r


def describe(r):
    """tapegrad's figures of one configuration (bracketed), in a line."""
    # MFU counts the FLOPs the step runs; a classifier batch run in length groups runs fewer than the
    # padded batch PyTorch runs (docs/performance.md, "The FLOP count")
    run_flops = (f" ({r['gflop_per_step']:.1f} GFLOP a step run of the padded batch's {r['padded_gflop_per_step']:.1f})"
                 if r['gflop_per_step'] < r['padded_gflop_per_step'] else "")
    both = (f" (runs {r['runs'][0]:.2f} and {r['runs'][1]:.2f}, before and after PyTorch's)"
            if len(r["runs"]) == 2 else "")
    print(f"tapegrad {r['config']}: {r['steps_per_second']:.2f} steps/s{both}, {r['gflops']:.0f} GFLOP/s{run_flops} = "
          f"{100 * r['model_flop_utilisation']:.1f}% of the measured FMA peak ({r['peak_gflops']:.0f} GFLOP/s), "
          f"{r['threads']} threads, kernels {r['blas_kernels']}, peak RSS {r['peak_rss_mib']:.0f} MiB, "
          f"{r['heap_allocations_per_step']} heap allocations per step"
          + (f", {r['tokens_per_second']:.0f} tokens/s" if r.get("model") == "language_model" else ""), flush=True)
    if r["blas_advice"]:
        print(f"  note: {r['blas_advice']}")


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

    # One process a configuration: peak RSS is the process's, and long's after medium's would be medium's.
    # Each configuration's PyTorch runs come between two of tapegrad's (its figure is their mean), so that a
    # ratio compares runs of the same minutes: on a shared host whose speed moves by a third within minutes,
    # all of tapegrad's runs first and all of PyTorch's minutes later measured the drift as much as the code.
    settings = pytorch_settings(cpu_flags()) if have_torch else []
    ours, theirs = {}, {}
    for config in CONFIGS:
        bench = [tapegrad, "bench", "--config", config, "--json"]
        runs = [json.loads(run(bench).strip().splitlines()[-1])]
        if not ours:
            print(f"CPU: {runs[0]['cpu']}, {runs[0]['vector_bits']}-bit vectors ({runs[0]['instruction_set']})")
        if have_torch:  # a skipped setting: one line each
            theirs[config] = pytorch_best(config, long_settings(settings, theirs["medium"]) if config in FEW_SETTINGS
                                          else settings)
            runs.append(json.loads(run(bench).strip().splitlines()[-1]))
        ours[config] = bracketed(runs)
        describe(ours[config])

    scaling = json.loads(run([tapegrad, "bench", "--config", "small", "--scaling", "--json"]).strip().splitlines()[-1])
    print(f"tapegrad small on {scaling['threads']} threads against 1: {scaling['thread_scaling']:.2f}x "
          f"(the median of alternated chunk pairs)")

    train_rss = {}
    for config, flags in TRAIN_RUNS.items():
        with tempfile.TemporaryDirectory() as run_dir:
            train_rss[config] = run_with_peak([tapegrad, "train", "--task", "majority"] + flags +
                                              ["--out", os.path.join(run_dir, "run"), "--overwrite", "--threads", "0"])
        print(f"tapegrad train, {config} model on T = {CONFIGS[config]['context_length']} ({TRAIN_RUN_WHAT[config]}): "
              f"peak RSS {train_rss[config]:.0f} MiB")
    if not have_torch:
        return

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
    lm, lm_torch = ours["lm"], theirs["lm"]
    if lm_torch is not None:
        tokens = CONFIGS["lm"]["batch_size"] * CONFIGS["lm"]["context_length"]
        print(f"{'lm':8} training tokens/s: tapegrad {lm['tokens_per_second']:.0f}, PyTorch "
              f"{lm_torch['steps_per_second'] * tokens:.0f}: {lm['steps_per_second'] / lm_torch['steps_per_second']:.2f}x")
    for config in TRAIN_RUNS:
        if theirs[config] is not None:
            torch_rss = theirs[config]["peak_rss_mib"]
            print(f"{'memory':8} tapegrad train ({config}) {train_rss[config]:.0f} MiB vs PyTorch {config} step "
                  f"{torch_rss:.0f} MiB: {100 * train_rss[config] / torch_rss:.0f}%")


if __name__ == "__main__":
    main()
