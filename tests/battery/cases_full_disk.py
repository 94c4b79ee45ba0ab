"""Class 8: output to a full disk (docs/reliability.md, "Results that cannot be written are an error" and "A
failed write is found before any summary says the work is done"). stdout is /dev/full: a non-zero exit,
a line saying stdout could not be written, and no line saying the work was done.
"""

from harness import Case, failed_without_success_line, refused
from run_edits import copy_corpus

GROUP = "8 full disk"
FULL = "/dev/full"
# Lines that report work as done: generate's `N tokens in`, train's `finished after` and `try:`.
SUCCESS_MARKS = (" tokens in ", "finished after", "try:", "checkpoint:")


def setup_all(work):
    copy_corpus(work)
    work.copy_run("chars8")
    work.copy_run("classifier", "classifier")
    work.copy_file(work.fixtures.tsv, "data.tsv")


GENERATE = ["tapegrad", "generate", "--checkpoint", "run", "--prompt", "the ", "--max-new-tokens", "20", "--seed", "1"]
COMMANDS = [
    ("generate", GENERATE),
    ("generate --json", GENERATE + ["--json"]),
    ("generate --no-cache", GENERATE + ["--no-cache"]),
    ("generate of 5000 tokens", GENERATE[:-3] + ["5000", "--seed", "1"]),
    ("eval of a language model", ["tapegrad", "eval", "--checkpoint", "run", "--data", "held_out.txt"]),
    ("eval --json of a language model", ["tapegrad", "eval", "--checkpoint", "run", "--data", "held_out.txt", "--json"]),
    ("eval of a classifier", ["tapegrad", "eval", "--checkpoint", "classifier", "--task", "majority"]),
    ("eval --json of a classifier", ["tapegrad", "eval", "--checkpoint", "classifier", "--task", "majority", "--json"]),
    ("predict", ["tapegrad", "predict", "--checkpoint", "classifier", "--text", "t1 t2 t1"]),
    ("predict --json", ["tapegrad", "predict", "--checkpoint", "classifier", "--text", "t1 t2 t1", "--json"]),
    ("gradcheck --list", ["tapegrad", "gradcheck", "--list"]),
    ("train --json", ["tapegrad", "train", "--task", "lm", "--data", "corpus.txt", "--out", "new", "--steps", "2",
                      "--d-model", "16", "--heads", "2", "--ff", "32", "--layers", "1", "--batch-size", "8", "--json"]),
]
HELPS = [[], ["train"], ["generate"], ["eval"], ["predict"], ["gradcheck"], ["bench"]]


def cases(fixtures):
    out = []
    for what, argv in COMMANDS:
        out.append(Case(GROUP, f"{what} > /dev/full fails, and no line says the work was done", argv,
                        [failed_without_success_line(SUCCESS_MARKS), refused("stdout", stdout_empty=False)]
                        if not what.startswith("train") else [failed_without_success_line(SUCCESS_MARKS)],
                        setup=setup_all, stdout_path=FULL))
    for words in HELPS:
        argv = ["tapegrad", *words, "--help"]
        out.append(Case(GROUP, f"tapegrad {' '.join(words + ['--help'])} > /dev/full fails with one line",
                        argv, [refused("stdout", stdout_empty=False)], stdout_path=FULL))
    return out
