"""Class 4: every command tapegrad suggests runs as printed (docs/reliability.md, "Every command tapegrad
suggests runs as printed"): train's `try:` lines, the `continue with:` line of an interrupted run and the
commands quoted in refusals, each starting with the program as it was started (argv[0]), shell-quoted, and
working when pasted into a shell in the folder the user was in.
"""

import os
import re
import shlex
import signal
import subprocess
import time

from fixtures import RUNS, TINY_MODEL
from harness import Case, Result, contract_violations, custom, refused, run_process

GROUP = "4 suggested commands"

QUOTED_COMMAND = re.compile(r"`([^`]+)`")


def lines_after(stderr: bytes, marker: str):
    text = stderr.decode("utf-8", "replace")
    return [line.split(marker, 1)[1].strip() for line in text.splitlines() if marker in line]


def run_suggestion(command: str, cwd: str, program: str, timeout=60, wants_stdout=True):
    """Runs command through a shell, as a user pasting it would; checks its first word is program, and
    (wants_stdout: generate's text, predict's labels) that it printed its results."""
    words = shlex.split(command)
    if not words or words[0] != program:
        return None, f"the suggestion does not start with the program as started ({program!r}): {command!r}"
    result = run_process(["bash", "-c", command], cwd, timeout)
    problems = contract_violations(result)
    if problems or result.returncode != 0:
        return result, (f"the suggestion {command!r} exited {result.returncode} {problems}: "
                        f"{' | '.join(result.stderr_lines())[:400]!r}")
    if wants_stdout and not result.stdout.strip():
        return result, f"the suggestion {command!r} printed nothing on stdout"
    return result, None


def try_line_case(fixture):
    """The try: lines of a fixture's training, run in a copy of the folder the training ran in."""
    def setup(work):
        import shutil
        shutil.copytree(work.fixtures.folder(fixture), work.path("here"), symlinks=True)
        work.state["lines"] = lines_after(work.fixtures.results[fixture].stderr, "try:")

    def runner(case, work, argv):
        return work.fixtures.results[fixture]

    def check(result, work):
        if not work.state["lines"]:
            return "train printed no `try:` line"
        for line in work.state["lines"]:
            _, problem = run_suggestion(line, work.path("here"), work.tapegrad)
            if problem:
                return problem
        return None
    args, out = RUNS[fixture]
    return Case(GROUP, f"train's try: line runs as printed ({fixture}, --out {out!r})",
                ["tapegrad", *args, "--out", out], [custom(check)], setup=setup, runner=runner)


def train_then_try(name, extra, files, out="run"):
    """A case that trains (the command under test) and then runs every try: line it printed."""
    def setup(work):
        for rel, text in files.items():
            work.write(rel, text)

    def check(result, work):
        if result.returncode != 0:
            return f"train exited {result.returncode}: {result.stderr[-300:]!r}"
        lines = lines_after(result.stderr, "try:")
        if not lines:
            return "train printed no `try:` line"
        program = result.argv[0]
        for line in lines:
            _, problem = run_suggestion(line, work.dir, program)
            if problem:
                return problem
        return None
    return Case(GROUP, name, ["tapegrad", "train", *extra, *TINY_MODEL, "--steps", "6", "--eval-every", "6",
                              "--out", out], [custom(check)], setup=setup)


def refusal_hint_case(name, setup, argv):
    """A refusal whose line quotes a command: the command starts with argv[0] and runs as printed."""
    def check(result, work):
        commands = QUOTED_COMMAND.findall(result.stderr.decode("utf-8", "replace"))
        if not commands:
            return f"the refusal quotes no command: {result.stderr[:300]!r}"
        for command in commands:
            _, problem = run_suggestion(command, work.dir, result.argv[0],
                                        wants_stdout=not shlex.split(command)[1:2] == ["train"])
            if problem:
                return problem
        return None
    return Case(GROUP, name, argv, [refused(), custom(check)], setup=setup)


def copy_fixture_run(fixture, rel="run"):
    def setup(work):
        work.copy_run(fixture, rel)
        work.copy_file(work.fixtures.corpus, "corpus.txt")
    return setup


def interrupted_run_case(out):
    """SIGTERM during training prints `continue with: ...`, which resumes the run as printed."""
    def runner(case, work, argv):
        began = time.monotonic()
        process = subprocess.Popen(argv, cwd=work.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True)
        # Signalled once training has begun (its lock is in --out), not after a fixed time: on a fast machine
        # the run would be over first.
        lock = os.path.join(work.dir, argv[argv.index("--out") + 1], ".lock")
        while not os.path.exists(lock) and process.poll() is None and time.monotonic() - began < 30:
            time.sleep(0.01)
        time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        try:
            out_bytes, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out_bytes, err = process.communicate()
            return Result(argv, None, out_bytes, err, time.monotonic() - began, True)
        return Result(argv, process.returncode, out_bytes, err, time.monotonic() - began, False)

    def check(result, work):
        if result.returncode != 128 + signal.SIGTERM:
            return f"expected exit 143 after SIGTERM, got {result.returncode}: {result.stderr[-300:]!r}"
        lines = lines_after(result.stderr, "continue with:")
        if not lines:
            return f"no `continue with:` line: {result.stderr[-300:]!r}"
        for line in lines:
            words = shlex.split(line)
            if not words or words[0] != result.argv[0]:
                return f"the suggestion does not start with the program as started: {line!r}"
            resumed = run_process(["bash", "-c", line], work.dir, 90)
            if resumed.returncode != 0:
                return f"{line!r} exited {resumed.returncode}: {resumed.stderr[-300:]!r}"
        return None
    return Case(GROUP, f"an interrupted run's continue with: line resumes it as printed (--out {out!r})",
                ["tapegrad", "train", "--task", "lm", "--data", "corpus.txt", "--context-length", "8", *TINY_MODEL,
                 "--steps", "40000", "--eval-every", "10000", "--out", out],
                [custom(check)], setup=lambda work: work.copy_file(work.fixtures.corpus, "corpus.txt"), runner=runner,
                expected_signal_exit=128 + signal.SIGTERM, timeout=150)


def cases(fixtures):
    out = [try_line_case(name) for name in RUNS]
    with open(fixtures.corpus, encoding="utf-8") as source:
        corpus = source.read()
    dash_valid = "--no-cache $HOME 'it''s' `date` \"q\" \\ and then the cat sat on the mat.\n" * 3
    for tokenizer in ("characters", "words", "bpe"):
        for context in ("1", "2", "3", "8"):
            extra = ["--task", "lm", "--data", "corpus.txt", "--valid", "valid.txt", "--tokenizer", tokenizer,
                     "--context-length", context] + (["--vocab-size", "80"] if tokenizer == "bpe" else [])
            out.append(train_then_try(
                f"train's try: line runs for a validation text of dashes, quotes and $ ({tokenizer}, context {context})",
                extra, {"corpus.txt": corpus + dash_valid, "valid.txt": dash_valid}, out=f"run {context} $x"))
    out.append(train_then_try("train's try: line of a classifier on TSV data with a text starting with -- runs",
                              ["--data", "data.tsv", "--valid", "valid.tsv"],
                              {"data.tsv": open(fixtures.tsv, encoding="utf-8").read(),
                               "valid.tsv": "pos\t--json -x 'a' $HOME\nneg\t--text ok\n"}))
    relative = train_then_try("train started by a relative path suggests a command that runs from the same folder",
                              ["--task", "lm", "--data", "corpus.txt"], {"corpus.txt": corpus})
    relative_setup = relative.setup
    relative.setup = lambda work: (relative_setup(work), os.makedirs(work.path("bin")),
                                   os.symlink(work.tapegrad, work.path("bin/tg")))
    relative.argv = ["./bin/tg", *relative.argv[1:]]
    out.append(relative)
    out += [
        refusal_hint_case("--resume of a run's best checkpoint quotes a command that runs",
                          copy_fixture_run("chars8"), ["tapegrad", "train", "--resume", "run/best", "--steps", "14"]),
        refusal_hint_case("--resume of a run's latest checkpoint quotes a command that runs",
                          copy_fixture_run("chars8"), ["tapegrad", "train", "--resume", "run/latest"]),
        refusal_hint_case("train --out of an existing run quotes a command that runs",
                          copy_fixture_run("chars8"), ["tapegrad", "train", "--task", "lm", "--data", "corpus.txt",
                                                       "--steps", "3", "--out", "run"]),
        refusal_hint_case("train --out of an existing run whose name needs quoting quotes a command that runs",
                          copy_fixture_run("chars8", "my run's -x"),
                          ["tapegrad", "train", "--task", "lm", "--data", "corpus.txt", "--steps", "3", "--out",
                           "my run's -x"]),
        refusal_hint_case("predict of a language model quotes a command that runs",
                          copy_fixture_run("chars8"), ["tapegrad", "predict", "--checkpoint", "run", "--text", "the"]),
        refusal_hint_case("generate of a classifier quotes a command that runs",
                          copy_fixture_run("classifier"), ["tapegrad", "generate", "--checkpoint", "run",
                                                           "--prompt", "t1"]),
        interrupted_run_case("run"),
        interrupted_run_case("my run's -x"),
    ]
    return out
