"""Edits of a copied run folder's files, and the commands that read a language model's checkpoint.

A case edits the files of run/latest (the checkpoint the run's names point at) in place, then runs one of
the four readers that docs/reliability.md says all go through one loader: `train --resume`, `train
--init`, `eval` and `generate`.
"""

import json
import os

from harness import absent, untouched

LATEST = "run/latest"


def edit_json(work, rel, change):
    """Reads run/latest/<rel> as JSON, lets change(doc) edit it (or return a new one), writes it back."""
    path = work.path(os.path.join(LATEST, rel))
    with open(path, encoding="utf-8") as source:
        doc = json.load(source)
    changed = change(doc)
    with open(path, "w", encoding="utf-8") as out:
        json.dump(doc if changed is None else changed, out, indent=1, ensure_ascii=False)


def edit_text(work, rel, change):
    """change(text) -> text, for edits JSON cannot express (duplicate keys, bad numbers, truncation)."""
    path = work.path(os.path.join(LATEST, rel))
    with open(path, encoding="utf-8") as source:
        text = source.read()
    with open(path, "w", encoding="utf-8") as out:
        out.write(change(text))


def set_key(path_keys, value):
    """A change setting doc[k1][k2]... = value."""
    def change(doc):
        node = doc
        for key in path_keys[:-1]:
            node = node[key]
        node[path_keys[-1]] = value
    return change


def copy_corpus(work):
    work.copy_file(work.fixtures.corpus, "corpus.txt")
    work.copy_file(work.fixtures.held_out, "held_out.txt")


PROMPTS = {"characters": "the ", "words": "the cat", "bpe": "the "}


def lm_readers(tokenizer):
    """The four readers of a language model's checkpoint: (short name, argv, checks after a refusal)."""
    return [
        ("train --resume", ["tapegrad", "train", "--resume", "run", "--steps", "20"], [untouched("run")]),
        ("train --init", ["tapegrad", "train", "--task", "lm", "--init", "run", "--data", "corpus.txt", "--out", "new",
                          "--steps", "2", "--batch-size", "8", "--threads", "1"], [untouched("run"), absent("new")]),
        ("eval", ["tapegrad", "eval", "--checkpoint", "run", "--data", "held_out.txt"], [untouched("run")]),
        ("generate", ["tapegrad", "generate", "--checkpoint", "run", "--prompt", PROMPTS[tokenizer],
                      "--max-new-tokens", "5", "--seed", "1"], [untouched("run")]),
    ]


def edited_run_setup(fixture, *edits):
    """A setup copying fixture as run/ beside the corpus, then applying each edit(work)."""
    def setup(work):
        work.copy_run(fixture)
        copy_corpus(work)
        for edit in edits:
            edit(work)
    return setup


RAW_MARK = "__battery_raw_number__"


def set_raw_number(rel, path_keys, literal):
    """An edit writing doc[k1][k2]... as the literal text given (1e400, -0.0, 1e-300), which JSON's own
    writer would not keep as written, into run/latest/<rel>."""
    def edit(work):
        edit_json(work, rel, set_key(path_keys, RAW_MARK))
        edit_text(work, rel, lambda text: text.replace(f'"{RAW_MARK}"', literal))
    return edit
