#!/usr/bin/python3
"""`make bench-long-scaling`: time per step and peak memory of the `long` model against T, tapegrad and PyTorch.

For T = 256, 512, ..., 8192 (batch 2; d_model 256, 4 heads, d_ff 1024, 2 layers: `tapegrad bench --config
long` otherwise), runs `tapegrad bench --json` and the PyTorch twin (bench/train_step_torch.py), each in a
fresh process, and writes a Markdown table (T, steps/s, seconds per step and peak RSS of both, and their
ratios) to OUT.md and a log-log plot of time per step and peak memory against T to OUT.svg (hand-written
SVG: only the standard library is used). Reference lines proportional to T and T² pass through tapegrad's
first point, so a slope can be read off: attention that materialises (T, T) scores grows like T² in memory.

PyTorch is stopped at the first T where it runs out of memory (its address space is limited to the memory
available when the script starts, so an allocation fails with an error instead of waking the OOM killer) or
takes more than 60 s a step (the process is ended after 60 s a step plus start-up); the larger T are noted,
not run. A tapegrad run that fails (e.g. refused as too large for the machine) is noted the same way.
PyTorch's OPENBLAS_CORETYPE is that of its fastest setting at the smallest T (1 and 2 threads x unset,
Haswell, SkylakeX: those the CPU can run); at every T it runs on 1 and on 2 threads and the faster counts,
since which is faster changes with T (on 2 cores of a Zen 5 EPYC: 1 thread at T = 256, 2 at T = 2048).
--torch-threads / --torch-coretype fix either.

Steps per T: about --budget seconds of timed steps (default 20) from the previous T's time scaled by
(T / T_prev)² (an upper bound: attention is the only quadratic term), at least 1 and at most 50; one
warm-up step (none when a step is expected to take over 30 s). Not part of `make bench`: a full run takes
tens of minutes.

    /usr/bin/python3 bench/long_scaling.py path/to/tapegrad OUT.md [--svg OUT.svg] [--lengths 256,512]
"""
import argparse
import datetime
import json
import math
import os
import resource
import signal
import subprocess
import sys
import time
from xml.sax.saxutils import escape

from compare import cpu_flags, pytorch_settings  # the settings this CPU can run, as make bench offers them

HERE = os.path.dirname(os.path.abspath(__file__))
TWIN = os.path.join(HERE, "train_step_torch.py")
MODEL = dict(d_model=256, heads=4, ff=1024, layers=2, batch_size=2)  # `tapegrad bench --config long`, T aside
LENGTHS = [256, 512, 1024, 2048, 4096, 8192]
STEP_LIMIT_S = 60.0        # PyTorch (and tapegrad) stop beyond this many seconds a step
STARTUP_S = 90.0           # import torch, or tapegrad's FMA peak measurement, before the first step
MAX_STEPS = 50


def model_flags(seq):
    return [x for k, v in {**MODEL, "context_length": seq}.items() for x in ("--" + k.replace("_", "-"), str(v))]


def available_bytes():
    """MemAvailable of /proc/meminfo in bytes, or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def plan(expected_step_s, budget_s):
    """(warm-up steps, timed steps, chunks) for a step expected to take expected_step_s seconds."""
    steps = max(1, min(MAX_STEPS, int(budget_s / max(expected_step_s, 1e-3))))
    if steps >= 5:
        steps -= steps % 5
    return (0 if expected_step_s > 30 else 1), steps, (5 if steps >= 5 else 1)


def run_limited(cmd, env, timeout_s, address_space):
    """Runs cmd with its address space limited (None: no limit) and a wall-clock limit. Returns (stdout,
    None) on success, else (None, why) with why a few words."""
    def limit():
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=limit, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the child and nothing else
        proc.communicate()
        return None, f"more than {STEP_LIMIT_S:.0f} s a step (stopped after {timeout_s:.0f} s)"
    if proc.returncode == 0:
        return out, None
    text = err.strip().splitlines()
    last = text[-1] if text else ""
    if proc.returncode < 0:
        why = f"killed by {signal.Signals(-proc.returncode).name}"
    elif "allocate" in err or "memory" in err.lower():
        why = "out of memory"
    else:
        why = f"exit code {proc.returncode}"
    return None, f"{why}: {last}" if last else why


def run_tapegrad(tapegrad, seq, expected_s, budget_s, address_space):
    warmup, steps, _ = plan(expected_s, budget_s)
    cmd = [tapegrad, "bench", "--config", "long", *model_flags(seq), "--warmup", str(warmup), "--steps", str(steps),
           "--json"]
    out, why = run_limited(cmd, dict(os.environ), STARTUP_S + STEP_LIMIT_S * (warmup + steps), address_space)
    if why:
        return None, why
    r = json.loads(out.strip().splitlines()[-1])
    return {"steps_per_second": r["steps_per_second"], "peak_rss_mib": r["peak_rss_mib"], "steps": steps,
            "threads": r["threads"], "cpu": r["cpu"], "kernels": r["blas_kernels"]}, None


def torch_env(threads, coretype):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    return env


def run_torch(seq, threads, coretype, expected_s, budget_s, address_space):
    warmup, steps, repeats = plan(expected_s, budget_s)
    cmd = ["/usr/bin/python3", TWIN, *model_flags(seq), "--warmup", str(warmup), "--steps", str(steps),
           "--repeats", str(repeats), "--threads", str(threads)]
    out, why = run_limited(cmd, torch_env(threads, coretype), STARTUP_S + STEP_LIMIT_S * (warmup + steps),
                           address_space)
    if why:
        return None, why
    fields = dict(kv.split("=") for kv in out.strip().splitlines()[-1].split()[1:])
    rate = float(fields["steps_per_s"])
    if 1 / rate > STEP_LIMIT_S:
        return None, f"more than {STEP_LIMIT_S:.0f} s a step ({1 / rate:.0f} s)"
    return {"steps_per_second": rate, "peak_rss_mib": float(fields["peak_rss_mib"]), "steps": steps}, None


def setting_name(threads, coretype):
    return f"{threads} thread{'s' if threads > 1 else ''}, OPENBLAS_CORETYPE={coretype or 'unset'}"


def best_torch_setting(seq, address_space):
    """The fastest (threads, coretype) of the twin at T = seq, over the settings this CPU can run."""
    best, best_rate = None, 0.0
    for threads, coretype in pytorch_settings(cpu_flags()):
        r, why = run_torch(seq, threads, coretype, 0.5, 5.0, address_space)
        print(f"  PyTorch T = {seq}, {setting_name(threads, coretype)}: "
              + (f"{r['steps_per_second']:.2f} steps/s" if r else f"skipped ({why})"), flush=True)
        if r and r["steps_per_second"] > best_rate:
            best, best_rate = (threads, coretype), r["steps_per_second"]
    return best


def expected_seconds(previous, seq, first_guess):
    """A step's expected time at seq from the previous measured (T, seconds), scaled by (T / T_prev)²."""
    if previous is None:
        return first_guess
    t_prev, s_prev = previous
    return s_prev * (seq / t_prev) ** 2


# ---- the outputs ------------------------------------------------------------------------------------------

def fmt(value, digits=2):
    return "—" if value is None else f"{value:.{digits}f}"


def markdown(rows, notes, header):
    lines = header + ["",
        "| T | tapegrad steps/s | PyTorch steps/s | speed ratio | tapegrad s/step | PyTorch s/step "
        "| tapegrad peak RSS MiB | PyTorch peak RSS MiB | memory ratio | PyTorch threads |",
        "|---|---|---|---|---|---|---|---|---|---|"]
    for seq, ours, theirs in rows:
        o_rate = ours["steps_per_second"] if ours else None
        t_rate = theirs["steps_per_second"] if theirs else None
        o_mem = ours["peak_rss_mib"] if ours else None
        t_mem = theirs["peak_rss_mib"] if theirs else None
        lines.append(
            f"| {seq} | {fmt(o_rate, 3)} | {fmt(t_rate, 3)} | "
            f"{fmt(o_rate / t_rate) + '×' if o_rate and t_rate else '—'} | "
            f"{fmt(1 / o_rate if o_rate else None, 3)} | {fmt(1 / t_rate if t_rate else None, 3)} | "
            f"{fmt(o_mem, 0)} | {fmt(t_mem, 0)} | "
            f"{fmt(100 * o_mem / t_mem, 0) + '%' if o_mem and t_mem else '—'} | "
            f"{theirs['threads'] if theirs else '—'} |")
    if notes:
        lines.append("")
        lines += [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def log_ticks(lo, hi):
    """1, 2, 5 × 10^k between lo and hi (only decades when they span more than two)."""
    ticks = []
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    steps = (1,) if len(decades) > 3 else (1, 2, 5)
    for e in decades:
        for m in steps:
            v = m * 10.0 ** e
            if lo * 0.999 <= v <= hi * 1.001:
                ticks.append(v)
    return ticks


def tick_label(v):
    return f"{v:g}" if v >= 0.01 else f"{v:.0e}"


def panel(x0, y0, w, h, title, unit, series, lengths, guides):
    """One log-log panel: series = [(name, colour, [(T, value)])]; guides = [(label, exponent)] drawn through
    the first point of the first series. Returns SVG elements."""
    values = [v for _, _, pts in series for _, v in pts]
    if not values:
        return [f'<text x="{x0 + w / 2}" y="{y0 + h / 2}" font-size="12" text-anchor="middle">no data</text>']
    lo, hi = min(values) / 1.5, max(values) * 1.5
    anchor = next((pts[0] for _, _, pts in series if pts), None)
    for _, p in guides:  # keep the guides inside the panel: extend the range to where they end, within reason
        end = anchor[1] * (lengths[-1] / anchor[0]) ** p
        hi = max(hi, min(end, max(values) * 20))
    tx = lambda t: x0 + w * (math.log(t) - math.log(lengths[0])) / (math.log(lengths[-1]) - math.log(lengths[0]))
    ty = lambda v: y0 + h - h * (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))
    out = [f'<text x="{x0 + w / 2:.1f}" y="{y0 - 14}" font-size="14" text-anchor="middle">{escape(title)}</text>']
    for t in lengths:
        out.append(f'<line x1="{tx(t):.1f}" y1="{y0}" x2="{tx(t):.1f}" y2="{y0 + h}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{tx(t):.1f}" y="{y0 + h + 16}" font-size="11" text-anchor="middle">{t}</text>')
    for v in log_ticks(lo, hi):
        out.append(f'<line x1="{x0}" y1="{ty(v):.1f}" x2="{x0 + w}" y2="{ty(v):.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{x0 - 6}" y="{ty(v) + 4:.1f}" font-size="11" text-anchor="end">{tick_label(v)}</text>')
    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#333333"/>')
    out.append(f'<text x="{x0 + w / 2:.1f}" y="{y0 + h + 34}" font-size="12" text-anchor="middle">'
               f'sequence length T (tokens)</text>')
    out.append(f'<text x="{x0 - 52}" y="{y0 + h / 2:.1f}" font-size="12" text-anchor="middle" '
               f'transform="rotate(-90 {x0 - 52} {y0 + h / 2:.1f})">{escape(unit)}</text>')
    if anchor:
        for label, p in guides:
            t_end = lengths[-1]
            v_end = anchor[1] * (t_end / anchor[0]) ** p
            if v_end > hi:  # clip where the guide leaves the panel
                t_end = anchor[0] * (hi / anchor[1]) ** (1 / p)
                v_end = hi
            out.append(f'<line x1="{tx(anchor[0]):.1f}" y1="{ty(anchor[1]):.1f}" x2="{tx(t_end):.1f}" '
                       f'y2="{ty(v_end):.1f}" stroke="#999999" stroke-dasharray="4 4"/>')
            out.append(f'<text x="{tx(t_end) - 4:.1f}" y="{ty(v_end) + 14:.1f}" font-size="11" fill="#777777" '
                       f'text-anchor="end">{escape(label)}</text>')
    for name, colour, pts in series:
        if not pts:
            continue
        path = " ".join(f"{tx(t):.1f},{ty(v):.1f}" for t, v in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for t, v in pts:
            out.append(f'<circle cx="{tx(t):.1f}" cy="{ty(v):.1f}" r="3.5" fill="{colour}"/>')
    return out


def svg(rows, subtitle):
    width, height = 980, 470
    ours = [(seq, o) for seq, o, _ in rows if o]
    theirs = [(seq, t) for seq, _, t in rows if t]
    lengths = [seq for seq, _, _ in rows]
    if len(lengths) == 1:
        lengths = [lengths[0] // 2, lengths[0] * 2]
    colours = {"tapegrad": "#1f77b4", "PyTorch": "#d62728"}
    guides = [("∝ T", 1), ("∝ T²", 2)]
    time_series = [("tapegrad", colours["tapegrad"], [(s, 1 / r["steps_per_second"]) for s, r in ours]),
                   ("PyTorch", colours["PyTorch"], [(s, 1 / r["steps_per_second"]) for s, r in theirs])]
    memory_series = [("tapegrad", colours["tapegrad"], [(s, r["peak_rss_mib"]) for s, r in ours]),
                     ("PyTorch", colours["PyTorch"], [(s, r["peak_rss_mib"]) for s, r in theirs])]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
             f'<text x="{width / 2}" y="24" font-size="15" text-anchor="middle">{escape(subtitle)}</text>']
    parts += panel(90, 70, 360, 320, "time per training step (log-log)", "seconds per step", time_series, lengths,
                   guides)
    parts += panel(580, 70, 360, 320, "peak resident memory (log-log)", "peak RSS (MiB)", memory_series, lengths,
                   guides)
    for i, (name, colour) in enumerate(colours.items()):
        x = 360 + i * 150
        parts.append(f'<line x1="{x}" y1="{height - 22}" x2="{x + 28}" y2="{height - 22}" stroke="{colour}" '
                     f'stroke-width="2"/>')
        parts.append(f'<text x="{x + 34}" y="{height - 18}" font-size="12">{name}</text>')
    parts.append(f'<line x1="660" y1="{height - 22}" x2="688" y2="{height - 22}" stroke="#999999" '
                 f'stroke-dasharray="4 4"/>')
    parts.append(f'<text x="694" y="{height - 18}" font-size="12">∝ T, ∝ T² through tapegrad\'s first point</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tapegrad")
    parser.add_argument("out", help="the Markdown table's path (OUT.md)")
    parser.add_argument("--svg", help="the plot's path (default: OUT with .svg in place of .md)")
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="comma-separated T values")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds of timed steps per T and framework")
    parser.add_argument("--torch-threads", type=int, choices=(1, 2), help="PyTorch's threads (default: best)")
    parser.add_argument("--torch-coretype", help="PyTorch's OPENBLAS_CORETYPE ('unset': none; default: best)")
    parser.add_argument("--no-torch", action="store_true", help="tapegrad only")
    a = parser.parse_args()
    try:
        lengths = sorted({int(x) for x in a.lengths.split(",")})
    except ValueError:
        parser.error(f"--lengths: '{a.lengths}' is not a comma-separated list of integers")
    if not lengths or lengths[0] < 4:
        parser.error("--lengths: every T must be at least 4")
    if a.budget <= 0:
        parser.error("--budget must be positive")
    svg_path = a.svg or (a.out[:-3] if a.out.endswith(".md") else a.out) + ".svg"

    have_torch = not a.no_torch and subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                                                   capture_output=True).returncode == 0
    notes = []
    if a.no_torch:
        notes.append("PyTorch not run (--no-torch)")
    elif not have_torch:
        notes.append("/usr/bin/python3 has no torch (Debian's python3-torch): tapegrad's figures only")
        print(notes[-1])
    available = available_bytes()
    address_space = int(available * 0.9) if available else None

    coretype, thread_counts = None, [a.torch_threads] if a.torch_threads else [1, 2]
    if have_torch:
        if a.torch_coretype:
            coretype = None if a.torch_coretype == "unset" else a.torch_coretype
            how = "as asked"
        else:
            print(f"PyTorch's OPENBLAS_CORETYPE: its fastest setting's at T = {lengths[0]}", flush=True)
            best = best_torch_setting(lengths[0], address_space)
            if best is None:
                notes.append("PyTorch: every setting failed at the smallest T")
                have_torch = False
            else:
                coretype = best[1]
                how = f"its fastest setting's at T = {lengths[0]}"

    rows, previous_ours, previous_theirs = [], None, None
    ours_stopped = theirs_stopped = None
    first = None
    for seq in lengths:
        ours = theirs = None
        if ours_stopped is None:
            started = time.time()
            ours, why = run_tapegrad(a.tapegrad, seq, expected_seconds(previous_ours, seq, 0.2), a.budget,
                                     address_space)
            if ours:
                previous_ours = (seq, 1 / ours["steps_per_second"])
                first = first or ours
                print(f"tapegrad T = {seq}: {ours['steps_per_second']:.3f} steps/s, peak RSS "
                      f"{ours['peak_rss_mib']:.0f} MiB ({ours['steps']} steps, {time.time() - started:.0f} s)",
                      flush=True)
            else:
                ours_stopped = seq
                notes.append(f"tapegrad stopped at T = {seq}: {why}")
                print(notes[-1], flush=True)
        if have_torch and theirs_stopped is None:
            started = time.time()
            why = None
            for threads in thread_counts:  # the faster counts; the last failure's reason if both fail
                r, failed = run_torch(seq, threads, coretype, expected_seconds(previous_theirs, seq, 0.5), a.budget,
                                      address_space)
                if r:
                    r["threads"] = threads
                    print(f"PyTorch  T = {seq}, {setting_name(threads, coretype)}: {r['steps_per_second']:.3f} "
                          f"steps/s, peak RSS {r['peak_rss_mib']:.0f} MiB ({r['steps']} steps, "
                          f"{time.time() - started:.0f} s)", flush=True)
                    if theirs is None or r["steps_per_second"] > theirs["steps_per_second"]:
                        theirs = r
                else:
                    why = failed
                    print(f"PyTorch  T = {seq}, {setting_name(threads, coretype)}: {failed}", flush=True)
                    if failed.startswith("out of memory"):
                        break  # the other thread count needs the same memory
                started = time.time()
            if theirs:
                previous_theirs = (seq, 1 / theirs["steps_per_second"])
            else:
                theirs_stopped = seq
                notes.append(f"PyTorch stopped at T = {seq}: {why}"
                             + ("" if seq == lengths[-1] else f"; T > {seq} not run"))
                print(notes[-1], flush=True)
        rows.append((seq, ours, theirs))

    try:
        commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = ""
    header = [f"`bench/long_scaling.py` on {datetime.date.today().isoformat()}"
              + (f", commit {commit}" if commit else "") + ": the `long` model (d_model 256, 4 heads, d_ff 1024, "
              "2 layers, batch 2) against T, one training step (forward, backward, AdamW) on `tapegrad bench`'s "
              "fixed batch."]
    if first:
        header.append(f"tapegrad: {first['threads']} threads, CPU {first['cpu']}, kernels {first['kernels']}.")
    if have_torch:
        limit = f"; its address space is limited to {address_space / 2**30:.1f} GiB" if address_space else ""
        threads = " and ".join(map(str, thread_counts))
        header.append(f"PyTorch: OPENBLAS_CORETYPE={coretype or 'unset'} ({how}), on {threads} thread"
                      f"{'s' if thread_counts != [1] else ''} at each T (the faster counts: the threads column), "
                      f"each run in a fresh process{limit}.")
    header.append("Peak RSS is each process's whole peak (getrusage), PyTorch's including about 230 MiB of "
                  "`import torch`.")
    for path in (a.out, svg_path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(markdown(rows, notes, header))
    with open(svg_path, "w") as f:
        f.write(svg(rows, "tapegrad and PyTorch on the long model (d_model 256, 4 heads, 2 layers, batch 2)"))
    print(f"wrote {a.out} and {svg_path}")


if __name__ == "__main__":
    main()
