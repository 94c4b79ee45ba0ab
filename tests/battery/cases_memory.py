"""Class 5: memory need (docs/reliability.md, "Memory"). Under `ulimit -v`, a model, batch or data set that
cannot fit is refused before any work with one line naming the flags that shrink it, and no --out folder
or .lock is left (an --out folder that existed stays as it was).
"""

import os

from harness import Case, absent, custom, refused, untouched
from run_edits import copy_corpus, edit_json, set_key

GROUP = "5 memory"
LIMIT_KIB = 1500000
NEED = ("needs about", "need about")  # a model "needs", a task's examples "need"
QUICK_SECONDS = 10.0  # a refusal before any work; training or allocating first takes longer


def quick(result, work):
    if result.seconds > QUICK_SECONDS:
        return f"the refusal took {result.seconds:.1f} s: work was done first"
    return None


def words_corpus(distinct):
    """A text of `distinct` different words, so --tokenizer words makes a vocabulary of distinct + 1."""
    return " ".join(f"w{i}" for i in range(distinct)) + "\n"


def lm(*flags, data="corpus.txt"):
    return ["tapegrad", "train", "--task", "lm", "--data", data, "--out", "new", "--steps", "5", *flags]


def classifier(*flags):
    return ["tapegrad", "train", "--out", "new", "--steps", "5", *flags]


# (what cannot fit, argv, the flags the line must name, setup)
CASES = [
    ("a language model of width 8192", lm("--d-model", "8192", "--heads", "1"), ["--d-model"]),
    ("a language model of feed-forward width 10^7", lm("--ff", "10000000"), ["--ff"]),
    ("a language model of 5000 layers", lm("--layers", "5000", "--d-model", "512", "--heads", "1"), ["--layers"]),
    ("a language model batch of 10^6 windows", lm("--batch-size", "1000000"), ["--batch-size"]),
    ("a language model batch of 2^62 windows", lm("--batch-size", "4611686018427387904"), ["--batch-size"]),
    ("a language model context of 10^6", lm("--context-length", "1000000", "--batch-size", "64"), ["--context-length"]),
    ("a tied language model of width 65536", lm("--d-model", "65536", "--heads", "1", "--tie-embeddings"),
     ["--d-model"]),
    ("a bpe vocabulary of 50000 whose text does not exist",
     lm("--tokenizer", "bpe", "--vocab-size", "50000", "--batch-size", "512", "--context-length", "256",
        data="nowhere.txt"), ["--vocab-size"]),
    ("the (B, T, V) logits of 20000 words",
     lm("--tokenizer", "words", "--context-length", "256", "--batch-size", "512", data="words.txt"),
     ["--batch-size", "--tokenizer"]),
    ("the V x C embedding and head of 20000 words",
     lm("--tokenizer", "words", "--d-model", "4096", "--layers", "0", "--batch-size", "1",
        data="words.txt"), ["--d-model", "--tokenizer"]),
    ("a classifier of width 4096 and feed-forward 16384", classifier("--d-model", "4096", "--ff", "16384", "--heads", "1"),
     ["--d-model", "--ff"]),
    ("a classifier batch of 10^12", classifier("--batch-size", "1000000000000"), ["--batch-size"]),
    ("a classifier training set of 2 x 10^7 examples", classifier("--train-size", "20000000"), ["--train-size"]),
    ("a classifier validation set of 10^7 examples", classifier("--valid-size", "10000000"), ["--valid-size"]),
    ("a classifier task of sequences of 2^20 words", classifier("--max-len", "1048576"), ["--max-len"]),
    ("a classifier task of 65536 symbols and width 4096",
     classifier("--symbols", "65536", "--d-model", "4096", "--layers", "0"), ["--symbols"]),
    ("a classifier context of 10^6", classifier("--context-length", "1000000"), ["--context-length"]),
    ("a classifier of width 8192 on TSV data",
     ["tapegrad", "train", "--data", "data.tsv", "--out", "new", "--steps", "5", "--d-model", "8192", "--heads", "1"],
     ["--d-model"]),
    ("an --init of a language model with a batch of 10^7",
     ["tapegrad", "train", "--task", "lm", "--init", "run", "--data", "corpus.txt", "--out", "new", "--steps", "5",
      "--batch-size", "10000000"], ["--batch-size"]),
]


def setup_all(work):
    copy_corpus(work)
    work.copy_run("chars8")
    work.write("words.txt", words_corpus(20000))
    work.copy_file(work.fixtures.tsv, "data.tsv")


def setup_with_empty_out(work):
    setup_all(work)
    os.makedirs(work.path("empty"))


def resume_with_huge_batch_setup(work):
    setup_all(work)
    edit_json(work, "trainer.json", set_key(["options", "batch_size"], 10000000))


def cases(fixtures):
    out = []
    for what, argv, names in CASES:
        out.append(Case(GROUP, f"train refuses {what} under ulimit -v, naming {' and '.join(names)}", argv,
                        [refused(NEED, *names), absent("new"), custom(quick)], setup=setup_all,
                        ulimit_kib=LIMIT_KIB))
    for what, argv, names in CASES[:3] + CASES[10:12]:
        existing = [a if a != "new" else "empty" for a in argv]
        out.append(Case(GROUP, f"train refuses {what} into an existing empty --out and leaves it empty", existing,
                        [refused(NEED, *names), untouched("empty"), custom(quick)],
                        setup=setup_with_empty_out,
                        ulimit_kib=LIMIT_KIB))
    out.append(Case(GROUP, "train --resume refuses a run whose trainer.json claims a batch of 10^7, leaving it as it was",
                    ["tapegrad", "train", "--resume", "run", "--steps", "20"], [refused(), untouched("run"),
                                                                                custom(quick)],
                    setup=resume_with_huge_batch_setup, ulimit_kib=LIMIT_KIB))
    return out
