#!/usr/bin/python3
"""`make bench-mpi`: data-parallel scaling of `mpirun -np N tapegrad train` on this machine, and a model of
the communication cost beyond it (docs/distributed.md).

For each model (the small and medium configurations of `tapegrad bench`) and N = 1, 2, 4 ranks, trains
with a fixed batch per rank (weak scaling: the step's batch grows with N) and reads the run's --json
summary: steps/s, examples/s, and per step what rank 0 waited after its backward: for the other ranks to
finish theirs, then for the gradient sums, with overlap (the default) and without (--no-overlap: the
whole allreduce after every rank's backward, i.e. its own time). One run of each: the machine is shared,
so read ratios, not absolute rates.
Then the projection: bytes each rank sends per step in a ring allreduce, 2 (N-1)/N x 4 P, and the time
2 (N-1) alpha + 2 (N-1)/N x 4 P / beta on networks of given latency alpha and bandwidth beta.

    /usr/bin/python3 bench/mpi_scaling.py path/to/tapegrad [--ranks 1,2,4] [--steps N]
Only the standard library: it runs wherever mpirun and tapegrad do.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

MODELS = {  # `tapegrad bench`'s small and medium configurations, as train flags; per-rank batch
    "small": dict(flags=["--d-model", "64", "--heads", "4", "--ff", "128", "--layers", "2", "--max-len", "32",
                         "--min-len", "32"], batch=64, steps=300),
    "medium": dict(flags=["--d-model", "256", "--heads", "8", "--ff", "1024", "--layers", "4", "--max-len", "128",
                          "--min-len", "128"], batch=32, steps=30),
}
NETWORKS = [  # (name, latency alpha in s, bandwidth beta in bytes/s)
    ("shared memory (here)", 1e-6, 5e9),
    ("1 Gb/s Ethernet", 50e-6, 117e6),
    ("10 Gb/s Ethernet", 20e-6, 1.17e9),
    ("100 Gb/s InfiniBand", 2e-6, 12e9),
]
PROJECTED_RANKS = [2, 8, 32, 128]
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def train(mpirun, tapegrad, ranks, model, steps, extra, out):
    spec = MODELS[model]
    cmd = [mpirun, "-np", str(ranks), tapegrad, "train", "--task", "majority", *spec["flags"],
           "--batch-size", str(spec["batch"]), "--steps", str(steps), "--eval-every", str(steps),
           "--out", out, "--overwrite", "--json", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **ROOT_ENV})
    if proc.returncode != 0:
        sys.exit(f"bench/mpi_scaling.py: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tapegrad")
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--steps", type=int, default=0, help="steps per run (default: per model)")
    parser.add_argument("--models", default="small,medium")
    args = parser.parse_args()
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        sys.exit("bench/mpi_scaling.py: mpirun not found on PATH: install openmpi-bin (Debian's OpenMPI; "
                 "`make test` installs it) and build tapegrad again so that CMake finds MPI")
    ranks_list = [int(n) for n in args.ranks.split(",")]
    print(f"{os.cpu_count()} cores; weak scaling (a fixed batch per rank); one run of each\n")
    print("| model | ranks | batch/step | steps/s | examples/s | speed-up | speed-up / N | waiting for ranks | "
          "allreduce, overlap | allreduce, --no-overlap |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    measured = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            steps = args.steps or MODELS[model]["steps"]
            base = None
            for n in ranks_list:
                out = os.path.join(tmp, f"{model}-{n}")
                s = train(mpirun, args.tapegrad, n, model, steps, [], out)
                plain = train(mpirun, args.tapegrad, n, model, steps, ["--no-overlap"], out) if n > 1 else s
                examples = s["train_steps_per_second"] * MODELS[model]["batch"] * n
                base = base or examples
                speedup = examples / base
                ranks_wait = s.get("rank_wait_seconds_per_step", 0) * 1e3
                summed = s.get("allreduce_seconds_per_step", 0) * 1e3
                summed_plain = plain.get("allreduce_seconds_per_step", 0) * 1e3
                print(f"| {model} | {n} | {MODELS[model]['batch'] * n} | {s['train_steps_per_second']:.1f} | "
                      f"{examples:.0f} | {speedup:.2f}x | {speedup / n:.0%} | {ranks_wait:.2f} ms | {summed:.2f} ms | "
                      f"{summed_plain:.2f} ms |")
                measured[(model, n)] = s
            measured[(model, "params")] = s["parameters"]
            measured[(model, "step")] = 1 / measured[(model, 1)]["train_steps_per_second"] if 1 in ranks_list else None

    print("\nCommunication per step in a ring allreduce of float32 gradients, projected (alpha, beta above):\n")
    print("| model | bytes per step | network | " + " | ".join(f"N={n}" for n in PROJECTED_RANKS) + " |")
    print("|---|---|---|" + "---|" * len(PROJECTED_RANKS))
    for model in args.models.split(","):
        params = measured[(model, "params")]
        size = 4 * params
        step = measured[(model, "step")]
        for name, alpha, beta in NETWORKS:
            cells = []
            for n in PROJECTED_RANKS:
                t = 2 * (n - 1) * alpha + 2 * (n - 1) / n * size / beta
                cells.append(f"{t * 1e3:.2f} ms" + (f" ({step / (step + t):.0%})" if step else ""))
            print(f"| {model} ({params} parameters) | {size / 1e6:.2f} MB | {name} | " + " | ".join(cells) + " |")
    print("\n(in brackets: the scaling efficiency if none of it overlapped the one-rank step of this machine)")


if __name__ == "__main__":
    main()
