"""Class 7: messages name the flag or file, never an internal function or class (brief; docs/reliability.md,
"Messages name the flag, not the library"). Every case of the battery is checked for the names in
harness.INTERNAL_NAMES; these cases go where a library's own message is likeliest to leak: SentencePiece's
trainer and loader, the model builder, the weight loader, the sampler.
"""

import os

from harness import Case, absent, custom, refused, untouched
from run_edits import copy_corpus, edit_json, edited_run_setup, set_key
from safetensors_file import read_safetensors, write_safetensors

GROUP = "7 messages"


def answered(result, work):
    """Either it worked, or it said no in one line of its own: no message of a library (the global check)."""
    if result.returncode == 0:
        return None
    return refused().check(result, work)


def lm(*flags, data="corpus.txt"):
    return ["tapegrad", "train", "--task", "lm", "--data", data, "--out", "new", "--steps", "2", "--d-model", "16",
            "--heads", "2", "--ff", "32", "--layers", "1", "--batch-size", "8", *flags]


def generate(*flags, checkpoint="run", prompt="the "):
    return ["tapegrad", "generate", "--checkpoint", checkpoint, "--prompt", prompt, "--max-new-tokens", "4", *flags]


def with_files(files, fixture="chars8"):
    def setup(work):
        work.copy_run(fixture)
        copy_corpus(work)
        for rel, content in files.items():
            work.write(rel, content)
    return setup


def config(change):
    return edited_run_setup("chars8", lambda work: edit_json(work, "config.json", change))


def drop_tensor(name):
    """Removes a tensor from run/latest/model.safetensors, rewriting the header and buffer consistently."""
    def edit(work):
        path = work.path("run/latest/model.safetensors")
        tensors, metadata = read_safetensors(path)
        del tensors[name]
        write_safetensors(path, tensors, metadata)
    return edit


REFUSALS = [
    # (what, setup, argv, names)
    ("generate --top-k -1", edited_run_setup("chars8"), generate("--top-k", "-1"), ["--top-k"]),
    ("generate --max-new-tokens 1000001", edited_run_setup("chars8"), generate("--max-new-tokens", "1000001"),
     ["--max-new-tokens"]),
    ("generate of a checkpoint that does not exist", edited_run_setup("chars8"), generate(checkpoint="nowhere"),
     ["nowhere"]),
    ("generate of a checkpoint that is a file", edited_run_setup("chars8"), generate(checkpoint="corpus.txt"),
     ["corpus.txt"]),
    ("generate of a run's .checkpoints folder", edited_run_setup("chars8"), generate(checkpoint="run/.checkpoints"),
     [".checkpoints"]),
    ("generate of a run whose tokenizer.json is missing",
     edited_run_setup("chars8", lambda work: os.remove(work.path("run/latest/tokenizer.json"))),
     generate(), ["tokenizer.json"]),
    ("generate of a config.json whose heads do not divide d_model", config(set_key(["n_heads"], 3)), generate(),
     ["config.json", "n_heads"]),
    ("generate of a config.json of two layers beside one layer's weights", config(set_key(["n_layers"], 2)),
     generate(), ["model.safetensors"]),
    ("generate of a config.json whose context is shorter than the position table", config(set_key(["context_length"], 4)),
     generate(prompt="t"), [("model.safetensors", "config.json")]),
    ("generate of a config.json with rope beside learned positions' weights", config(set_key(["positional"], "rope")),
     generate(), ["model.safetensors"]),
    ("generate of a config.json with an unregistered norm", config(set_key(["norm"], "rmsnorm")), generate(),
     ["config.json", "rmsnorm"]),
    ("generate of a config.json of a classifier's kind", config(set_key(["kind"], "classifier")), generate(),
     [("config.json", "run holds a classifier")]),
    ("generate of a config.json of an unknown kind", config(set_key(["kind"], "diffusion")), generate(),
     ["config.json", "diffusion"]),
    ("generate of weights missing head.weight", edited_run_setup("chars8", drop_tensor("head.weight")), generate(),
     ["model.safetensors", "head.weight"]),
    ("predict --attention-svg of a language model", edited_run_setup("chars8"),
     ["tapegrad", "predict", "--checkpoint", "run", "--text", "the", "--attention-svg", "map.svg"], ["run"]),
    ("eval of a language model on a binary file", with_files({"bin.txt": b"ab\x00cd\n"}),
     ["tapegrad", "eval", "--checkpoint", "run", "--data", "bin.txt"], ["bin.txt"]),
    ("eval of a language model on text of one token", with_files({"one.txt": "a"}),
     ["tapegrad", "eval", "--checkpoint", "run", "--data", "one.txt"], ["one.txt"]),
    ("eval of a language model on text of invalid UTF-8", with_files({"bad.txt": b"the \xc3\x28 cat\n"}),
     ["tapegrad", "eval", "--checkpoint", "run", "--data", "bad.txt"], ["bad.txt"]),
    ("train --task lm on a text of one character", with_files({"one.txt": "a"}), lm(data="one.txt"), ["one.txt"]),
    ("train --task lm with bpe --vocab-size 5, fewer than the text's characters", edited_run_setup("chars8"),
     lm("--tokenizer", "bpe", "--vocab-size", "5"), ["--vocab-size"]),
    ("train --task lm with bpe --vocab-size 1000000 from a small text", edited_run_setup("chars8"),
     lm("--tokenizer", "bpe", "--vocab-size", "1000000"), ["--vocab-size"]),
    ("train --task lm with bpe --vocab-size 0", edited_run_setup("chars8"), lm("--tokenizer", "bpe", "--vocab-size", "0"),
     ["--vocab-size"]),
    ("train --tokenizer-model of a text file", edited_run_setup("chars8"),
     lm("--tokenizer", "bpe", "--tokenizer-model", "corpus.txt"), ["corpus.txt"]),
    ("train --tokenizer-model of a folder", edited_run_setup("chars8"),
     lm("--tokenizer", "bpe", "--tokenizer-model", "run"), ["run"]),
    ("train --tokenizer-model that does not exist", edited_run_setup("chars8"),
     lm("--tokenizer", "bpe", "--tokenizer-model", "nowhere.model"), ["nowhere.model"]),
    ("train --tokenizer-model of a truncated model", with_files({"cut.model": b"\x0a\x05hel"}),
     lm("--tokenizer", "bpe", "--tokenizer-model", "cut.model"), ["cut.model"]),
    ("train --task lm with a --valid of only whitespace", with_files({"blank.txt": "  \n\n"}),
     lm("--valid", "blank.txt"), ["blank.txt"]),
    ("train --resume of a language model whose optimizer.safetensors is missing",
     edited_run_setup("chars8", lambda work: os.remove(work.path("run/latest/optimizer.safetensors"))),
     ["tapegrad", "train", "--resume", "run", "--steps", "20"], ["optimizer.safetensors"]),
]

ANSWERED = [
    ("train --task lm with --context-length longer than the text", with_files({"short.txt": "the cat sat on the mat\n"}),
     lm("--context-length", "4096", data="short.txt")),
    ("eval of a language model on a text wholly outside its vocabulary", with_files({"alien.txt": "ζζζ ωωω ψψψ\n" * 5}),
     ["tapegrad", "eval", "--checkpoint", "run", "--data", "alien.txt"]),
    ("generate of a prompt that spells <unk>", edited_run_setup("chars8"), generate(prompt="<unk>")),
    ("generate --top-k larger than the vocabulary", edited_run_setup("chars8"), generate("--top-k", "100000")),
    ("train --task lm with a --valid wholly outside the training characters", with_files({"alien.txt": "ζζζ ωωω\n" * 5}),
     lm("--valid", "alien.txt")),
    ("train --task lm --tokenizer words on a text of one word repeated", with_files({"same.txt": "cat " * 200}),
     lm("--tokenizer", "words", "--context-length", "4", data="same.txt")),
    ("train --task lm --tokenizer bpe on a text of one character repeated", with_files({"same.txt": "a" * 3000}),
     lm("--tokenizer", "bpe", "--vocab-size", "10", "--context-length", "4", data="same.txt")),
]


def cases(fixtures):
    out = []
    for what, setup, argv, names in REFUSALS:
        checks = [refused(*names, exit=(1, 2))]
        if "run" in argv:
            checks.append(untouched("run"))
        if "new" in argv:
            checks.append(absent("new"))
        out.append(Case(GROUP, f"{what} is refused by name, in tapegrad's own words", argv, checks, setup=setup))
    for what, setup, argv in ANSWERED:
        out.append(Case(GROUP, f"{what}: done, or refused in tapegrad's own words", argv, [custom(answered)],
                        setup=setup))
    return out
