#!/usr/bin/python3
"""`make bench`: tapegrad against today's frameworks on the same models, batch and optimizer, side by side.

Runs, for each configuration (small, medium, long and lm), `tapegrad bench --json` (a process each), then each
peer (bench/peers/peers.py: PyTorch 1.13 under /usr/bin/python3, PyTorch 2 eager, PyTorch 2 + torch.compile
and JAX jit under bench/peers/install.sh's environment), then tapegrad once more: the host's speed drifts by
tens of percent within minutes, so tapegrad's runs bracket the peers' and its figure is the mean of the two
(both printed). Each peer runs at every setting its users reach for on this CPU: 1 thread and every core,
and for PyTorch 1.13 (products in OpenBLAS) OPENBLAS_CORETYPE unset, Haswell (with AVX2) and SkylakeX (with
AVX-512) too, each in a fresh process, keeping the peer's best; long and lm, whose steps take seconds, give
PyTorch 1.13 only medium's best OPENBLAS_CORETYPE (see long_settings). A peer missing, or failing on a
configuration, is one line and `-` in the table.

Equal work (issue 39): the classifier's headline row is "unpadded", every row T tokens on both sides. The
"padded" row is `tapegrad bench`'s own batch (rows of T/4..T tokens), where tapegrad's length groups skip
the pads and the peers compute them: not the same work, and marked so. tapegrad's unpadded figure needs
`tapegrad bench --unpadded`; until the command has it, that cell is `-`. lm's windows have no pads.
Each peer's loss after its first step is printed beside tapegrad's (about ln(classes) or ln(V) on every
side: the same work from the same start). Then small's speed-up on every core against one thread (`tapegrad
bench --scaling`), and the peak resident memory of `tapegrad train` runs of the medium and long models
against each peer's peak on the same padded models. Ratios come from one run of each: the machine is
shared, so compare ratios, not absolute rates. docs/performance.md explains the columns.

    /usr/bin/python3 bench/compare.py path/to/tapegrad [--configs small,lm]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))
import peers as peer_runs  # noqa: E402  (bench/peers/peers.py)

VENV = os.environ.get("BENCH_VENV", os.path.join(os.path.dirname(HERE), "build", "bench-venv"))
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
# PyTorch 1.13's settings limited as long's (peer_settings): their PyTorch steps take seconds, so six settings would add minutes.
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


# A peer's first loss this far (relative) from tapegrad's says the work differs: the initial draws differ, so
# the same model's first losses differ by a few percent (small: tapegrad 2.089, PyTorch 2.140, JAX 2.106).
FIRST_LOSS_TOLERANCE = 0.15


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


def openblas_coretypes(flags):
    """OPENBLAS_CORETYPE values to try: a kernel set only where the CPU has its instructions (SkylakeX's
    AVX-512 kernels die of SIGILL on a CPU without AVX-512); None leaves the variable unset."""
    coretypes = [None]
    if {"avx2", "fma"} <= flags:
        coretypes.append("Haswell")
    if "avx512f" in flags:
        coretypes.append("SkylakeX")
    return coretypes


def peer_settings(peer, config, coretypes, medium_best):
    """The peer's (threads, OPENBLAS_CORETYPE) settings on config. For long and lm, PyTorch 1.13 gets 1 thread
    and every core at the OPENBLAS_CORETYPE of its medium best (every setting when medium had none). A long
    step takes 3 to 5 s, so six settings would add three minutes to `make bench` and two add one. On 2 cores
    of a Zen 5 EPYC, quiet, 1 warm-up and 5 steps: 2 threads ran 0.295 steps/s with OPENBLAS_CORETYPE unset
    and 0.296 with SkylakeX, 1 thread 0.244 and 0.195. The thread count moves long more than the kernel set,
    and which thread count wins is not medium's (on a loaded machine 1 thread won long), so both are tried."""
    settings = peer_runs.settings_of(peer, coretypes)
    if config in FEW_SETTINGS and peer.coretypes and medium_best is not None:
        settings = [(threads, coretype) for threads, coretype in settings if coretype == medium_best["coretype"]]
    return settings


def rows_of(config):
    """(row, twin and `tapegrad bench` flags) of config's rows, in the order they are measured: padded first,
    whose best setting of each peer the unpadded row reuses."""
    if CONFIGS[config].get("model") == "lm":
        return [("windows", [])]
    return [("padded", []), ("unpadded", ["--unpadded"])]


HEADLINE_ROWS = ("unpadded", "windows")  # equal work on both sides


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
    steps = CONFIGS[config]["steps"]
    flags = [x for k, v in CONFIGS[config].items() for x in ("--" + k.replace("_", "-"), str(v))]
    return flags + ["--repeats", "5" if steps % 5 == 0 else "1"]


def tapegrad_bench(tapegrad, config, flags):
    return json.loads(run([tapegrad, "bench", "--config", config, "--json"] + flags).strip().splitlines()[-1])


def tapegrad_has_unpadded(tapegrad):
    """Whether this `tapegrad bench` can run the classifier's batch unpadded (issue 39 asks it for one)."""
    return "--unpadded" in run([tapegrad, "bench", "--help"])


def bracketed(runs):
    """One figure from tapegrad's runs of a configuration (`tapegrad bench --json` lines): the first's fields,
    with steps/s, GFLOP/s, MFU and tokens/s the mean of the runs', and every run's steps/s in "runs"."""
    r = dict(runs[0])
    for key in ("steps_per_second", "gflops", "model_flop_utilisation", "tokens_per_second"):
        if key in r:
            r[key] = sum(x[key] for x in runs) / len(runs)
    r["runs"] = [x["steps_per_second"] for x in runs]
    return r


def describe(r, row):
    """tapegrad's figures of one configuration's row (bracketed), in a line."""
    # MFU counts the FLOPs the step runs; a classifier batch run in length groups runs fewer than the
    # padded batch the peers run (docs/performance.md, "The FLOP count")
    run_flops = (f" ({r['gflop_per_step']:.1f} GFLOP a step run of the padded batch's {r['padded_gflop_per_step']:.1f})"
                 if r['gflop_per_step'] < r['padded_gflop_per_step'] else "")
    both = (f" (runs {r['runs'][0]:.2f} and {r['runs'][1]:.2f}, before and after the peers')"
            if len(r["runs"]) == 2 else "")
    print(f"tapegrad {r['config']} {row}: {r['steps_per_second']:.2f} steps/s{both}, {r['gflops']:.0f} GFLOP/s{run_flops} = "
          f"{100 * r['model_flop_utilisation']:.1f}% of the measured FMA peak ({r['peak_gflops']:.0f} GFLOP/s), "
          f"{r['threads']} threads, kernels {r['blas_kernels']}, peak RSS {r['peak_rss_mib']:.0f} MiB, "
          f"{r['heap_allocations_per_step']} heap allocations per step"
          + (f", {r['tokens_per_second']:.0f} tokens/s" if r.get("model") == "language_model" else ""), flush=True)
    if r["blas_advice"]:
        print(f"  note: {r['blas_advice']}")


def describe_peer(peer, config, row, r):
    if r is None:
        return
    compiled = f", compile {r['compile_s']:.1f} s apart" if r["compile_s"] > 0 else ""
    tokens = f", {r['tokens_per_s']:.0f} tokens/s" if row == "windows" else ""
    print(f"  {peer.name} {config} {row}: {r['steps_per_s']:.2f} steps/s{tokens} at {r['setting']}, first loss "
          f"{r['first_loss']:.4f}, peak RSS {r['peak_rss_mib']:.0f} MiB{compiled}", flush=True)


def measure(tapegrad, config, peers, coretypes, medium_best, has_unpadded):
    """config's rows: {row: {"tapegrad": bracketed runs or None, peer name: best run or None}}. tapegrad's runs
    come before and after every peer's, so that a ratio compares runs of the same minutes: on a shared host
    whose speed moves by a third within minutes, all of tapegrad's runs first and all of the peers' minutes
    later measured the drift as much as the code."""
    rows = rows_of(config)
    ours = [(row, flags) for row, flags in rows if not flags or has_unpadded]
    runs = {row: [tapegrad_bench(tapegrad, config, flags)] for row, flags in ours}
    table = {row: {"tapegrad": None} for row, _ in rows}
    for peer in peers:
        if peer.missing:
            continue
        settings = peer_settings(peer, config, coretypes, medium_best.get(peer.name))
        for row, flags in rows:
            table[row][peer.name] = peer_runs.best_run(peer, f"{config} {row}", twin_flags(config) + flags, settings)
            describe_peer(peer, config, row, table[row][peer.name])
            if table[row][peer.name] is not None:  # the next rows at this row's best setting
                settings = [(table[row][peer.name]["threads"], table[row][peer.name]["coretype"])]
    for row, flags in ours:
        runs[row].append(tapegrad_bench(tapegrad, config, flags))
        table[row]["tapegrad"] = bracketed(runs[row])
        describe(table[row]["tapegrad"], row)
    return table


def check_first_losses(tapegrad, config, table, peers):
    """Prints each side's loss after one step of config's (padded) batch, and a warning for a peer far off."""
    first = tapegrad_bench(tapegrad, config, ["--warmup", "0", "--steps", "1"])["final_loss"]
    n = CONFIGS[config]["vocab"] if CONFIGS[config].get("model") == "lm" else CONFIGS[config].get("classes", 8)
    row = rows_of(config)[0][0]
    theirs = [(p.name, table[row].get(p.name)) for p in peers if table[row].get(p.name)]
    print(f"first loss {config}: tapegrad {first:.4f}, " +
          "".join(f"{name} {r['first_loss']:.4f}, " for name, r in theirs) + f"ln {n} = {math.log(n):.4f}")
    for name, r in theirs:
        if abs(r["first_loss"] - first) > FIRST_LOSS_TOLERANCE * first:
            print(f"bench: warning: {name}'s first loss on {config} is {r['first_loss']:.4f}, tapegrad's "
                  f"{first:.4f}: not the same model or batch?")


def cell(value, width):
    return f"{value:{width}.2f}" if value is not None else f"{'-':>{width}}"


def best_peer(cells, peers):
    """(name, steps/s) of the fastest peer in a row's cells, or None."""
    found = [(p.name, cells[p.name]["steps_per_s"]) for p in peers if cells.get(p.name)]
    return max(found, key=lambda x: x[1]) if found else None


def print_table(results, peers, has_unpadded):
    """Steps/s of tapegrad and every peer, the best peer and tapegrad's ratio to it; `-` where none ran."""
    names = [p.name for p in peers]
    widths = [max(len(name), 8) for name in names]
    best_width = max([len(name) for name in names] + [9])
    print()
    print(f"{'config':8} {'rows':9} {'tapegrad':>9} " + " ".join(f"{n:>{w}}" for n, w in zip(names, widths)) +
          f"  {'best peer':{best_width}} {'tapegrad/best':>13}   (steps/s)")
    for config, rows in results.items():
        for row in sorted(rows, key=lambda r: r not in HEADLINE_ROWS):
            cells = rows[row]
            ours = cells["tapegrad"]["steps_per_second"] if cells["tapegrad"] else None
            best = best_peer(cells, peers)
            ratio = f"{ours / best[1]:.2f}x" if ours and best else "-"
            if row == "padded" and ours and best:
                ratio += "*"
            print(f"{config:8} {row:9} {cell(ours, 9)} " +
                  " ".join(cell(cells[n]["steps_per_s"] if cells.get(n) else None, w) for n, w in zip(names, widths)) +
                  f"  {best[0] if best else '-':{best_width}} {ratio:>13}")
    print("* padded: tapegrad's length groups skip the pads that the peers compute, so not the same work; the "
          "unpadded and windows rows are.")
    if not has_unpadded:
        print("tapegrad's unpadded cells need `tapegrad bench --unpadded`, which this build does not have.")


def print_lm_tokens(results, peers):
    cells = results.get("lm", {}).get("windows")
    if not cells or not cells["tapegrad"]:
        return
    best = best_peer(cells, peers)
    if best:
        tokens = CONFIGS["lm"]["batch_size"] * CONFIGS["lm"]["context_length"]
        ours = cells["tapegrad"]
        print(f"{'lm':8} training tokens/s: tapegrad {ours['tokens_per_second']:.0f}, {best[0]} {best[1] * tokens:.0f}: "
              f"{ours['steps_per_second'] / best[1]:.2f}x")


def print_memory(results, train_rss, peers):
    for config, rss in train_rss.items():
        cells = results[config]["padded"]
        theirs = [f"{p.name} {cells[p.name]['peak_rss_mib']:.0f} MiB ({100 * rss / cells[p.name]['peak_rss_mib']:.0f}%)"
                  for p in peers if cells.get(p.name)]
        print(f"{'memory':8} tapegrad train ({config}) {rss:.0f} MiB vs the peers' {config} step: "
              + (", ".join(theirs) if theirs else "-"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tapegrad", help="the tapegrad command")
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"comma-separated, of {', '.join(CONFIGS)} (default: all)")
    a = parser.parse_args()
    configs = a.configs.split(",")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {', '.join(unknown)} (known: {', '.join(CONFIGS)})")
    tapegrad = a.tapegrad

    peers = peer_runs.all_peers(VENV)
    has_unpadded = tapegrad_has_unpadded(tapegrad)
    if not has_unpadded:
        print("bench: `tapegrad bench` has no --unpadded: tapegrad's unpadded rows are `-` (issue 39)")
    coretypes = openblas_coretypes(cpu_flags())
    # One process a configuration: peak RSS is the process's, and long's after medium's would be medium's.
    results, medium_best = {}, {}
    for config in configs:
        results[config] = measure(tapegrad, config, peers, coretypes, medium_best, has_unpadded)
        if config == "medium":
            medium_best = {name: r for name, r in results[config]["padded"].items() if name != "tapegrad" and r}
        check_first_losses(tapegrad, config, results[config], peers)

    scaling = json.loads(run([tapegrad, "bench", "--config", "small", "--scaling", "--json"]).strip().splitlines()[-1])
    print(f"tapegrad small on {scaling['threads']} threads against 1: {scaling['thread_scaling']:.2f}x "
          f"(the median of alternated chunk pairs)")
    print(f"CPU: {scaling['cpu']}, {scaling['vector_bits']}-bit vectors ({scaling['instruction_set']})")

    train_rss = {}
    for config, flags in TRAIN_RUNS.items():
        if config not in configs:
            continue
        with tempfile.TemporaryDirectory() as run_dir:
            train_rss[config] = run_with_peak([tapegrad, "train", "--task", "majority"] + flags +
                                              ["--out", os.path.join(run_dir, "run"), "--overwrite", "--threads", "0"])
        print(f"tapegrad train, {config} model on T = {CONFIGS[config]['context_length']} ({TRAIN_RUN_WHAT[config]}): "
              f"peak RSS {train_rss[config]:.0f} MiB")

    print_table(results, peers, has_unpadded)
    print_lm_tokens(results, peers)
    print_memory(results, train_rss, peers)


if __name__ == "__main__":
    main()
