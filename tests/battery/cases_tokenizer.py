"""Class 1: a tokenizer is part of the model (docs/reliability.md, "A language model's run").

Every edit of run/latest/tokenizer.json, and of config.json's tokenizer fields and vocabulary size, must be
refused by the file's name by all four readers of the checkpoint, leaving the run as it was.
"""

import base64
import json
import os

from harness import Case, refused
from run_edits import LATEST, edit_json, edit_text, edited_run_setup, lm_readers, set_key

GROUP = "1 tokenizer"


def swap(i, j):
    def change(doc):
        tokens = doc["tokens"]
        tokens[i], tokens[j] = tokens[j], tokens[i]
    return change


def duplicate(i, j):
    def change(doc):
        doc["tokens"][j] = doc["tokens"][i]
    return change


def drop(i):
    def change(doc):
        del doc["tokens"][i]
    return change


def move_last_first_after_unk(doc):
    doc["tokens"].insert(1, doc["tokens"].pop())


def append_token(token):
    def change(doc):
        doc["tokens"].append(token)
    return change


def truncate_half(text):
    return text[: len(text) // 2]


def duplicate_kind_key(text):
    return text.replace("{", '{\n "kind": "characters",', 1)


def edit_bpe_model(change_bytes):
    def change(doc):
        doc["model"] = base64.b64encode(change_bytes(base64.b64decode(doc["model"]))).decode()
    return change


def flip_last_byte(model):
    return model[:-1] + bytes([model[-1] ^ 0x01])


def tokenizer_edit(change=None, text_change=None):
    def edit(work):
        if change:
            edit_json(work, "tokenizer.json", change)
        if text_change:
            edit_text(work, "tokenizer.json", text_change)
    return edit


def tokenizer_from(other_fixture):
    def edit(work):
        source = os.path.join(work.fixtures.run(other_fixture), "latest", "tokenizer.json")
        work.copy_file(source, os.path.join(LATEST, "tokenizer.json"))
    return edit


def config_edit(change):
    return lambda work: edit_json(work, "config.json", change)


def vocab_size_by(delta):
    def change(doc):
        doc["vocab_size"] += delta
    return change


TOKENIZER_EDITS = {
    "chars8": [
        ("two entries swapped", tokenizer_edit(swap(5, 6))),
        ("<unk> swapped with the next token", tokenizer_edit(swap(0, 1))),
        ("an entry duplicated", tokenizer_edit(duplicate(4, 9))),
        ("an entry dropped", tokenizer_edit(drop(7))),
        ("a characters tokenizer reordered", tokenizer_edit(move_last_first_after_unk)),
        ("its kind changed to words", tokenizer_edit(set_key(["kind"], "words"))),
        ("its kind changed to bpe", tokenizer_edit(set_key(["kind"], "bpe"))),
        ("its kind an unknown name", tokenizer_edit(set_key(["kind"], "bytes"))),
        ("a token appended", tokenizer_edit(append_token("\u00e9"))),
        ("a token of two characters in a characters tokenizer", tokenizer_edit(set_key(["tokens", 10], "ab"))),
        ("the file truncated", tokenizer_edit(text_change=truncate_half)),
        ("an unknown key added", tokenizer_edit(set_key(["comment"], "edited by hand"))),
        ("the key 'kind' twice", tokenizer_edit(text_change=duplicate_kind_key)),
        ("the tokenizer of a words run", tokenizer_from("words8")),
        ("the tokenizer of a bpe run", tokenizer_from("bpe8")),
    ],
    "words8": [
        ("two entries swapped", tokenizer_edit(swap(5, 6))),
        ("an entry duplicated", tokenizer_edit(duplicate(4, 9))),
        ("an entry dropped", tokenizer_edit(drop(7))),
        ("<unk> not at id 0", tokenizer_edit(swap(0, 3))),
        ("its kind changed to characters", tokenizer_edit(set_key(["kind"], "characters"))),
        ("a word holding a space", tokenizer_edit(set_key(["tokens", 4], "two words"))),
        ("the file truncated", tokenizer_edit(text_change=truncate_half)),
        ("an unknown key added", tokenizer_edit(set_key(["version"], 2))),
    ],
    "bpe8": [
        ("its base64 holding a character outside base64", tokenizer_edit(
            lambda doc: doc.update(model=doc["model"][:40] + "!" + doc["model"][41:]))),
        ("its base64 cut to a length not a multiple of 4", tokenizer_edit(
            lambda doc: doc.update(model=doc["model"][:-3]))),
        ("its base64 decoding to bytes that are no model", tokenizer_edit(
            lambda doc: doc.update(model=base64.b64encode(b"\x00garbage" * 40).decode()))),
        ("its model's last byte flipped", tokenizer_edit(edit_bpe_model(flip_last_byte))),
        ("its model cut in half", tokenizer_edit(edit_bpe_model(lambda m: m[: len(m) // 2]))),
        ("its model empty", tokenizer_edit(set_key(["model"], ""))),
        ("its kind changed to characters", tokenizer_edit(set_key(["kind"], "characters"))),
        ("a tokens list added", tokenizer_edit(set_key(["tokens"], ["<unk>", "a"]))),
        ("the file truncated", tokenizer_edit(text_change=truncate_half)),
        ("the tokenizer of a characters run", tokenizer_from("chars8")),
    ],
}

CONFIG_EDITS = [
    ("config.json's tokenizer_digest another valid digest", config_edit(set_key(["tokenizer_digest"], "0123456789abcdef")),
     ("tokenizer.json", "tokenizer_digest")),
    ("config.json's tokenizer_digest not 16 hex digits", config_edit(set_key(["tokenizer_digest"], "XYZ")),
     ("tokenizer_digest",)),
    ("config.json's tokenizer_digest in upper case", config_edit(
        lambda doc: doc.update(tokenizer_digest=doc["tokenizer_digest"].upper())), ("tokenizer_digest",)),
    ("config.json's tokenizer_digest a number", config_edit(set_key(["tokenizer_digest"], 12345)),
     ("tokenizer_digest",)),
    ("config.json's vocab_size one more than the tokenizer and the embedding", config_edit(vocab_size_by(1)),
     (("config.json", "tokenizer.json", "model.safetensors", "trainer.json"),)),
    ("config.json's vocab_size one less than the tokenizer and the embedding", config_edit(vocab_size_by(-1)),
     (("config.json", "tokenizer.json", "model.safetensors", "trainer.json"),)),
]


def tokenizer_kind(fixture):
    return {"chars8": "characters", "words8": "words", "bpe8": "bpe"}[fixture]


def cases(fixtures):
    out = []
    for fixture, edits in TOKENIZER_EDITS.items():
        kind = tokenizer_kind(fixture)
        for what, edit in edits:
            for reader, argv, checks in lm_readers(kind):
                out.append(Case(GROUP, f"{reader} refuses a {kind} tokenizer.json with {what}", argv,
                                [refused("tokenizer.json"), *checks], setup=edited_run_setup(fixture, edit)))
    for what, edit, names in CONFIG_EDITS:
        for reader, argv, checks in lm_readers("characters"):
            out.append(Case(GROUP, f"{reader} refuses {what}", argv, [refused(*names), *checks],
                            setup=edited_run_setup("chars8", edit)))
    return out
