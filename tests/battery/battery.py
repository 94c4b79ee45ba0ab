#!/usr/bin/python3
"""A black-box battery of hostile and careless inputs against the tapegrad command (tests/battery/README.md).

  /usr/bin/python3 tests/battery/battery.py --tapegrad build/tapegrad [--jobs 2] [-k substring]

Prints one line per failing case (class, name, command, what was expected, what happened) and
`battery: N/M passed`; exits 0 only when every case passes.
"""

import argparse
import importlib
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fixtures import Fixtures  # noqa: E402
from harness import run_case  # noqa: E402
# One module a class of the brief (tests/battery/README.md), each with cases(fixtures) -> [Case].
CASE_MODULES = [importlib.import_module(name) for name in (
    "cases_tokenizer",
    "cases_reals",
    "cases_generation",
    "cases_suggested",
    "cases_memory",
    "cases_no_effect",
    "cases_messages",
    "cases_full_disk",
)]


def all_cases(fixtures):
    cases = []
    for module in CASE_MODULES:
        cases += module.cases(fixtures)
    names = [case.name for case in cases]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise SystemExit(f"battery: case names must be unique: {duplicates}")
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tapegrad", required=True, help="the tapegrad binary under test")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    parser.add_argument("-k", dest="substring", default="", help="run only the cases whose `[class] name` holds this")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("--verbose", action="store_true", help="also print each passing case, its command and the last line it printed on stderr")
    args = parser.parse_args()
    tapegrad = os.path.abspath(args.tapegrad)
    if not os.access(tapegrad, os.X_OK):
        raise SystemExit(f"battery: --tapegrad {args.tapegrad}: not an executable file")

    began = time.monotonic()
    root = tempfile.mkdtemp(prefix="tapegrad-battery-")
    try:
        fixtures = Fixtures(root, tapegrad)
        cases = [c for c in all_cases(fixtures) if args.substring in f"[{c.group}] {c.name}"]
        if args.list:
            for case in cases:
                print(f"[{case.group}] {case.name}")
            return 0
        problems = fixtures.train_all(max(1, args.jobs))
        if problems:
            for problem in problems:
                print(f"battery: {problem}")
            return 1
        print(f"battery: fixtures trained in {time.monotonic() - began:.1f} s; running {len(cases)} cases",
              flush=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            outcomes = list(pool.map(lambda case: run_case(case, root, tapegrad, fixtures), cases))
        failures = [o for o in outcomes if o.problems]
        for outcome in outcomes:
            if outcome.problems:
                print(f"FAIL [{outcome.case.group}] {outcome.case.name}\n  $ {outcome.command}\n"
                      + "".join(f"  - {p}\n" for p in outcome.problems), end="")
            elif args.verbose:
                said = outcome.result.stderr_lines()[-1:] if outcome.result else []
                print(f"ok   [{outcome.case.group}] {outcome.case.name}\n  $ {outcome.command}\n"
                      + "".join(f"  > {line[:300]}\n" for line in said), end="")
        print(f"battery: {len(outcomes) - len(failures)}/{len(outcomes)} passed "
              f"in {time.monotonic() - began:.1f} s")
        return 0 if not failures else 1
    finally:
        if not os.environ.get("BATTERY_KEEP"):
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"battery: kept {root}")


if __name__ == "__main__":
    sys.exit(main())
