"""The shared trained runs: one small run per tokenizer kind and context, trained once at start.

Cases copy a run (Work.copy_run) before they edit or resume it, so the runs here stay pristine. The
models are tiny (d_model 16, one layer, a few steps): the battery checks refusals and surfaces, not
learning, and the whole battery must run in a few minutes on 2 cores.
"""

import os
import random
import shutil
from concurrent.futures import ThreadPoolExecutor

from harness import run_process

WORDS = ("the cat sat on a mat and then ran to see her old dog who was not home so she went back "
         "over hill under tree near river while birds sang songs of spring rain fell soft on green "
         "fields every day people walk slowly past quiet houses").split()

TINY_MODEL = ["--d-model", "16", "--heads", "2", "--ff", "32", "--layers", "1", "--dropout", "0",
              "--batch-size", "8", "--threads", "1"]


def corpus_text(seed: int, lines: int) -> str:
    """English-like lines of the words above, the same text for the same seed."""
    draw = random.Random(seed)
    out = []
    for _ in range(lines):
        words = [draw.choice(WORDS) for _ in range(draw.randint(4, 12))]
        out.append(" ".join(words).capitalize() + ".")
    return "\n".join(out) + "\n"


def lm_args(tokenizer: str, context: int, extra=()):
    args = ["train", "--task", "lm", "--data", "corpus.txt", "--context-length", str(context),
            "--tokenizer", tokenizer, "--steps", "12", "--eval-every", "6", *TINY_MODEL, *extra]
    if tokenizer == "bpe":
        args += ["--vocab-size", "80"]
    return args


# name -> (train arguments before --out, the folder name --out gets). Class 4 needs names that need quoting.
RUNS = {
    "chars8": (lm_args("characters", 8), "run"),
    "words8": (lm_args("words", 8), "run"),
    "bpe8": (lm_args("bpe", 8), "run"),
    "chars1": (lm_args("characters", 1), "run"),
    "chars2": (lm_args("characters", 2), "run"),
    "chars3": (lm_args("characters", 3), "run"),
    "words1": (lm_args("words", 1), "run"),
    "words2": (lm_args("words", 2), "run"),
    "words3": (lm_args("words", 3), "run"),
    "bpe1": (lm_args("bpe", 1), "run"),
    "bpe2": (lm_args("bpe", 2), "run"),
    "bpe3": (lm_args("bpe", 3), "run"),
    "chars8_quoted": (lm_args("characters", 8), "my run's -x"),
    "words8_quoted": (lm_args("words", 8), "my run's -x"),
    "bpe8_quoted": (lm_args("bpe", 8), "my run's -x"),
    "rope8": (lm_args("characters", 8, ["--positional", "rope"]), "run"),
    "linear8": (lm_args("characters", 8, ["--attention", "linear"]), "run"),
    "classifier": (["train", "--task", "majority", "--steps", "12", "--eval-every", "6", "--train-size", "200",
                    "--valid-size", "40", *TINY_MODEL], "run"),
    "classifier_quoted": (["train", "--task", "majority", "--steps", "12", "--eval-every", "6", "--train-size",
                           "200", "--valid-size", "40", *TINY_MODEL], "my run's -x"),
}


class Fixtures:
    def __init__(self, root: str, tapegrad: str):
        self.root = os.path.join(root, "fixtures")
        self.tapegrad = tapegrad
        self.results = {}
        os.makedirs(self.root, exist_ok=True)
        self.corpus = self._write("corpus.txt", corpus_text(1, 400))
        self.held_out = self._write("held_out.txt", corpus_text(2, 60))
        self.tsv = self._write("data.tsv", "".join(f"{'pos' if i % 2 else 'neg'}\t{corpus_text(i, 1)}"
                                                   for i in range(60)))

    def _write(self, name: str, text: str) -> str:
        path = os.path.join(self.root, name)
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
        return path

    def folder(self, name: str) -> str:
        """Each run trains in a folder of its own, where corpus.txt sits beside --out."""
        return os.path.join(self.root, name)

    def run(self, name: str) -> str:
        return os.path.join(self.folder(name), RUNS[name][1])

    def out_name(self, name: str) -> str:
        return RUNS[name][1]

    def train_all(self, jobs: int) -> list:
        """Trains every run; returns the problems (a fixture that fails to train fails the battery)."""
        def train(name):
            folder = self.folder(name)
            os.makedirs(folder, exist_ok=True)
            shutil.copyfile(self.corpus, os.path.join(folder, "corpus.txt"))
            args, out = RUNS[name]
            result = run_process([self.tapegrad, *args, "--out", out], folder, timeout=120)
            self.results[name] = result
            if result.returncode != 0:
                return f"fixture {name}: train exited {result.returncode}: {result.stderr[-600:]!r}"
            return None
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return [p for p in pool.map(train, RUNS) if p]
