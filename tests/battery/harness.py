"""The battery's machinery: a case, the process it runs, and the generic checks of the contract.

The contract (docs/reliability.md): a bad input gets one line on stderr naming the flag or file and what
is wrong, a non-zero exit (1 a bad value or file, 2 an unparsable command line), never a signal, a
sanitizer report, a hang or an unbounded allocation, and nothing changed. Every check here returns None
when the promise holds and a short sentence saying what happened when it does not.
"""

import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Union

# Names of the implementation a user never typed: a message holding one leaks the library, not the input
# (brief, class 7). "what():" and "terminate called" are what an escaped C++ exception prints.
INTERNAL_NAMES = ("sample_token:", "TransformerEncoder:", "std::", "nlohmann", "what():",
                  "terminate called", "Tokenizer::", "TrainOptions.", "ClassifierOptions",
                  "LanguageModel:", "SequenceClassifier:", "validate(")
SANITIZER_MARKS = ("AddressSanitizer", "UndefinedBehaviorSanitizer", "runtime error:", "LeakSanitizer",
                   "Segmentation fault", "core dumped")
DEFAULT_TIMEOUT = 60.0


@dataclass
class Result:
    argv: List[str]
    returncode: Optional[int]  # None when the process was killed for running past its timeout
    stdout: bytes
    stderr: bytes
    seconds: float
    timed_out: bool

    def stderr_lines(self) -> List[str]:
        return [line for line in self.stderr.decode("utf-8", "replace").split("\n") if line.strip()]

    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


class Work:
    """A case's fresh folder, the shared fixtures it may copy, and the state its setup leaves."""

    def __init__(self, root: str, tapegrad: str, fixtures):
        self.dir = tempfile.mkdtemp(prefix="case-", dir=root)
        self.tapegrad = tapegrad
        self.fixtures = fixtures
        self.state = {}

    def path(self, rel: str) -> str:
        return os.path.join(self.dir, rel)

    def write(self, rel: str, content: Union[str, bytes]) -> str:
        full = self.path(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as out:
            out.write(content.encode("utf-8") if isinstance(content, str) else content)
        return full

    def read(self, rel: str) -> bytes:
        with open(self.path(rel), "rb") as source:
            return source.read()

    def copy_run(self, fixture: str, rel: str = "run") -> str:
        """A private copy of a shared trained run, its links kept as links (latest -> .checkpoints/...)."""
        shutil.copytree(self.fixtures.run(fixture), self.path(rel), symlinks=True)
        return self.path(rel)

    def copy_file(self, source: str, rel: str) -> str:
        os.makedirs(os.path.dirname(self.path(rel)) or self.dir, exist_ok=True)
        shutil.copyfile(source, self.path(rel))
        return self.path(rel)


def run_process(argv: Sequence[str], cwd: str, timeout: float = DEFAULT_TIMEOUT, stdin: Optional[bytes] = None,
                stdout_path: Optional[str] = None, ulimit_kib: Optional[int] = None, env=None) -> Result:
    """Runs argv in its own session, so that a hang is killed whole (its threads and children) at timeout."""
    argv = list(argv)
    launched = argv
    if ulimit_kib is not None:
        launched = ["bash", "-c", f"ulimit -v {int(ulimit_kib)}; exec \"$@\"", "bash"] + argv
    stdout_file = open(stdout_path, "wb") if stdout_path else None
    began = time.monotonic()
    process = subprocess.Popen(launched, cwd=cwd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                               stdout=stdout_file or subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True, env=env)
    timed_out = False
    try:
        out, err = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(process.pid, signal.SIGKILL)  # the session this call started, and only it
        out, err = process.communicate()
    finally:
        if stdout_file:
            stdout_file.close()
    return Result(argv, None if timed_out else process.returncode, out or b"", err or b"",
                  time.monotonic() - began, timed_out)


def tree_digest(path: str) -> str:
    """Every name, kind, link target and file content under path (links not followed), as one hash."""
    digest = hashlib.sha256()
    if not os.path.lexists(path):
        return "absent"
    entries = [path]
    for folder, dirs, files in os.walk(path, followlinks=False):
        entries += [os.path.join(folder, name) for name in sorted(dirs) + sorted(files)]
    for entry in sorted(entries):
        rel = os.path.relpath(entry, path)
        if os.path.islink(entry):
            digest.update(f"L {rel} -> {os.readlink(entry)}\n".encode())
        elif os.path.isdir(entry):
            digest.update(f"D {rel}\n".encode())
        else:
            with open(entry, "rb") as source:
                digest.update(f"F {rel} {hashlib.sha256(source.read()).hexdigest()}\n".encode())
    return digest.hexdigest()


def tree_listing(path: str) -> List[str]:
    listing = []
    for folder, dirs, files in os.walk(path, followlinks=False):
        listing += [os.path.relpath(os.path.join(folder, name), path) for name in dirs + files]
    return sorted(listing)


# ---- checks ------------------------------------------------------------------------------------------------

class Check:
    """before(work) runs after the setup and before the command; check(result, work) after it."""

    def before(self, work: Work) -> None:
        pass

    def check(self, result: Result, work: Work) -> Optional[str]:
        raise NotImplementedError


class refused(Check):
    """A non-zero exit (exit), one stderr line starting `tapegrad `, holding every string of names (each
    may be a tuple of alternatives), and nothing on stdout: the work was not done."""

    def __init__(self, *names, exit: Union[int, tuple] = 1, stdout_empty: bool = True):
        self.names = names
        self.exits = exit if isinstance(exit, tuple) else (exit,)
        self.stdout_empty = stdout_empty

    def check(self, result, work):
        lines = result.stderr_lines()
        shown = " | ".join(lines)[:600]
        expected = " or ".join(map(str, self.exits))
        if result.returncode == 0:
            return f"expected a refusal (exit {expected}), got exit 0; stderr: {shown!r}"
        if result.returncode not in self.exits:
            return f"expected exit {expected}, got {result.returncode}; stderr: {shown!r}"
        if len(lines) != 1:
            return f"expected one stderr line, got {len(lines)}: {shown!r}"
        line = lines[0]
        if not (line.startswith("tapegrad ") or line.startswith("tapegrad:")):
            return f"the line does not start with 'tapegrad <command>:': {line!r}"
        for name in self.names:
            alternatives = name if isinstance(name, tuple) else (name,)
            if not any(alternative in line for alternative in alternatives):
                return f"the line does not name {' or '.join(map(repr, alternatives))}: {line!r}"
        if self.stdout_empty and result.stdout.strip():
            return f"refused, but stdout has {len(result.stdout)} bytes first: {result.stdout[:200]!r}"
        return None


class succeeded(Check):
    def __init__(self, stdout_has: Sequence[str] = (), stderr_lacks: Sequence[str] = ()):
        self.stdout_has = stdout_has
        self.stderr_lacks = stderr_lacks

    def check(self, result, work):
        if result.returncode != 0:
            return f"expected exit 0, got {result.returncode}; stderr: {' | '.join(result.stderr_lines())[:600]!r}"
        text = result.stdout_text()
        for wanted in self.stdout_has:
            if wanted not in text:
                return f"stdout lacks {wanted!r}: {text[:300]!r}"
        for unwanted in self.stderr_lacks:
            if unwanted in result.stderr.decode("utf-8", "replace"):
                return f"stderr holds {unwanted!r}: {result.stderr[:300]!r}"
        return None


class failed_without_success_line(Check):
    """A write that could not be done: a non-zero exit, a line on stderr saying so, and no line on stderr
    reporting the work as done (`N tokens in`, `finished`, ...) before it."""

    def __init__(self, success_marks: Sequence[str]):
        self.success_marks = success_marks

    def check(self, result, work):
        if result.returncode in (0, None):
            return f"expected a non-zero exit, got {result.returncode}; stderr: {result.stderr[:300]!r}"
        text = result.stderr.decode("utf-8", "replace")
        for mark in self.success_marks:
            if mark in text:
                return f"stderr reports success ({mark!r}) though the output failed: {text[:400]!r}"
        if not result.stderr_lines():
            return "non-zero exit but nothing on stderr says why"
        return None


class untouched(Check):
    """The folder or file rel holds the same names, kinds, link targets and bytes after the command."""

    def __init__(self, rel: str = "run"):
        self.rel = rel

    def before(self, work):
        self.digest = tree_digest(work.path(self.rel))
        self.listing = tree_listing(work.path(self.rel)) if os.path.isdir(work.path(self.rel)) else []

    def check(self, result, work):
        if tree_digest(work.path(self.rel)) == self.digest:
            return None
        after = tree_listing(work.path(self.rel)) if os.path.isdir(work.path(self.rel)) else []
        added = sorted(set(after) - set(self.listing))
        removed = sorted(set(self.listing) - set(after))
        return f"{self.rel} changed (added {added[:6]}, removed {removed[:6]}, else file contents)"


class absent(Check):
    def __init__(self, rel: str):
        self.rel = rel

    def check(self, result, work):
        if os.path.lexists(work.path(self.rel)):
            return f"{self.rel} exists after a refused command: {tree_listing(work.path(self.rel))[:8]}"
        return None


class no_lock_left(Check):
    def __init__(self, rel: str):
        self.rel = rel

    def check(self, result, work):
        if os.path.lexists(os.path.join(work.path(self.rel), ".lock")):
            return f"{self.rel}/.lock left behind"
        return None


class custom(Check):
    """A one-off promise: predicate(result, work) returns None or what happened."""

    def __init__(self, predicate: Callable[[Result, Work], Optional[str]]):
        self.predicate = predicate

    def check(self, result, work):
        return self.predicate(result, work)


def contract_violations(result: Result) -> List[str]:
    """What no tapegrad process may ever do, whatever its input: applied to every case."""
    problems = []
    if result.timed_out:
        problems.append(f"hung: killed after {result.seconds:.0f} s")
    elif result.returncode is not None and result.returncode < 0:
        problems.append(f"killed by signal {-result.returncode} ({signal.Signals(-result.returncode).name})")
    elif result.returncode is not None and result.returncode > 128:
        problems.append(f"exit {result.returncode}, a signal's exit status")
    text = result.stderr.decode("utf-8", "replace")
    for mark in SANITIZER_MARKS:
        if mark in text:
            problems.append(f"stderr holds {mark!r}")
    for name in INTERNAL_NAMES:
        if name in text:
            problems.append(f"a message names the implementation ({name!r}): "
                            f"{next(l for l in text.splitlines() if name in l)[:300]!r}")
    return problems


@dataclass
class Case:
    group: str
    name: str
    argv: Union[Sequence[str], Callable[[Work], Sequence[str]]]  # "tapegrad" first, replaced by the binary
    checks: List[Check]
    setup: Optional[Callable[[Work], None]] = None
    stdin: Optional[bytes] = None
    stdout_path: Optional[str] = None
    ulimit_kib: Optional[int] = None
    timeout: float = DEFAULT_TIMEOUT
    # Signal exits (128 + n) that this case expects, e.g. 143 after a SIGTERM it sends.
    expected_signal_exit: Optional[int] = None
    runner: Optional[Callable[["Case", Work, List[str]], Result]] = None


@dataclass
class Outcome:
    case: Case
    command: str
    problems: List[str] = field(default_factory=list)
    result: Optional[Result] = None


def resolve_argv(case: Case, work: Work) -> List[str]:
    argv = list(case.argv(work) if callable(case.argv) else case.argv)
    if argv and argv[0] == "tapegrad":
        argv[0] = work.tapegrad
    return argv


def shown_command(case: Case, work: Work, argv: List[str]) -> str:
    command = shlex.join(["tapegrad" if a == work.tapegrad else a for a in argv])
    if case.ulimit_kib:
        command = f"(ulimit -v {case.ulimit_kib}; {command})"
    if case.stdout_path:
        command += f" > {case.stdout_path}"
    return command


def run_case(case: Case, root: str, tapegrad: str, fixtures) -> Outcome:
    work = Work(root, tapegrad, fixtures)
    outcome = Outcome(case, command="(setup)")
    try:
        if case.setup:
            case.setup(work)
        argv = resolve_argv(case, work)
        outcome.command = shown_command(case, work, argv)
        for check in case.checks:
            check.before(work)
        if case.runner:
            result = case.runner(case, work, argv)
        else:
            result = run_process(argv, work.dir, case.timeout, case.stdin, case.stdout_path, case.ulimit_kib)
        outcome.result = result
        problems = contract_violations(result)
        if case.expected_signal_exit is not None:
            problems = [p for p in problems if f"exit {case.expected_signal_exit}," not in p]
        for check in case.checks:
            problem = check.check(result, work)
            if problem:
                problems.append(problem)
        outcome.problems = problems
    except Exception as error:  # a setup that cannot be made is the battery's bug, reported as the case's
        outcome.problems = [f"battery error: {type(error).__name__}: {error}"]
    finally:
        if not os.environ.get("BATTERY_KEEP"):
            shutil.rmtree(work.dir, ignore_errors=True)
    return outcome
