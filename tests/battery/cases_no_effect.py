"""Class 6: a flag that would have no effect is refused by name, in every subcommand (README "Bad input and
faults"; docs/reliability.md, "A flag without effect is refused on every subcommand" and "The command line
says no instead of guessing"). Nothing is trained, written or locked.
"""

from fixtures import TINY_MODEL
from harness import Case, absent, refused, succeeded, untouched
from run_edits import copy_corpus

GROUP = "6 no effect"


def setup_all(work):
    copy_corpus(work)
    work.copy_run("chars8")
    work.copy_run("classifier", "classifier")
    work.copy_run("linear8", "linear")
    work.copy_run("bpe8", "bpe")
    work.copy_file(work.fixtures.tsv, "data.tsv")


def lm(*flags):
    return ["tapegrad", "train", "--task", "lm", "--data", "corpus.txt", "--out", "new", "--steps", "2", *TINY_MODEL,
            *flags]


def task(*flags):
    return ["tapegrad", "train", "--out", "new", "--steps", "2", *TINY_MODEL, *flags]


def init(*flags):
    return ["tapegrad", "train", "--task", "lm", "--init", "run", "--data", "corpus.txt", "--out", "new", "--steps", "2",
            *flags]


def resume(*flags):
    return ["tapegrad", "train", "--resume", "run", "--steps", "20", *flags]


def generate(*flags, checkpoint="run"):
    return ["tapegrad", "generate", "--checkpoint", checkpoint, "--prompt", "the ", "--max-new-tokens", "4", *flags]


# (what, argv, the flag the line must name)
TRAIN = [
    ("--vocab-size with --tokenizer characters", lm("--tokenizer", "characters", "--vocab-size", "100"), "--vocab-size"),
    ("--vocab-size with --tokenizer words", lm("--tokenizer", "words", "--vocab-size", "100"), "--vocab-size"),
    ("--vocab-size with the default tokenizer", lm("--vocab-size", "100"), "--vocab-size"),
    ("--tokenizer-model with --tokenizer characters", lm("--tokenizer-model", "bpe/tokenizer.model"), "--tokenizer-model"),
    ("--tokenizer-model with --tokenizer words", lm("--tokenizer", "words", "--tokenizer-model", "bpe/tokenizer.model"),
     "--tokenizer-model"),
    ("--vocab-size beside a --tokenizer-model, which fixes the vocabulary",
     lm("--tokenizer", "bpe", "--tokenizer-model", "bpe/tokenizer.model", "--vocab-size", "100"), "--vocab-size"),
    ("--tokenizer without --task lm", task("--tokenizer", "words"), "--tokenizer"),
    ("--tokenizer bpe for a classifier on TSV data",
     ["tapegrad", "train", "--data", "data.tsv", "--out", "new", "--steps", "2", "--tokenizer", "bpe"], "--tokenizer"),
    ("--vocab-size without --task lm", task("--vocab-size", "100"), "--vocab-size"),
    ("--tie-embeddings without --task lm", task("--tie-embeddings"), "--tie-embeddings"),
    ("--pool with --task lm", lm("--pool", "cls"), "--pool"),
    ("--final-norm with --task lm (always one)", lm("--final-norm"), "--final-norm"),
    ("--epochs with --task lm", lm("--epochs", "2"), "--epochs"),
    ("--no-shuffle with --task lm", lm("--no-shuffle"), "--no-shuffle"),
    ("--causal with --task lm (always causal)", lm("--causal"), "--causal"),
    ("--symbols with --task lm", lm("--symbols", "12"), "--symbols"),
    ("--train-size with --task lm", lm("--train-size", "100"), "--train-size"),
    ("--valid-size with --task lm", lm("--valid-size", "100"), "--valid-size"),
    ("--min-len with --task lm", lm("--min-len", "3"), "--min-len"),
    ("--max-len with --task lm", lm("--max-len", "9"), "--max-len"),
    ("--valid-fraction with --valid", lm("--valid", "held_out.txt", "--valid-fraction", "0.2"), "--valid-fraction"),
    ("--momentum with the default adamw", lm("--momentum", "0.5"), "--momentum"),
    ("--experts without --ffn moe", lm("--experts", "8"), "--experts"),
    ("--top-k without --ffn moe", lm("--top-k", "1"), "--top-k"),
    ("--attention-eps with softmax attention", lm("--attention-eps", "0.001"), "--attention-eps"),
    ("--temperature with linear attention", lm("--attention", "linear", "--temperature", "2"), "--temperature"),
    ("--heads with --layers 0", ["tapegrad", "train", "--task", "lm", "--data", "corpus.txt", "--out", "new", "--steps",
                                 "2", "--layers", "0", "--heads", "4", "--d-model", "16"], "--heads"),
    ("--tokenizer with --init", init("--tokenizer", "words"), "--tokenizer"),
    ("--vocab-size with --init", init("--vocab-size", "100"), "--vocab-size"),
    ("--tie-embeddings with --init", init("--tie-embeddings"), "--tie-embeddings"),
    ("--context-length with --init", init("--context-length", "16"), "--context-length"),
    ("--d-model with --init", init("--d-model", "32"), "--d-model"),
    ("--norm-eps with --init", init("--norm-eps", "0.001"), "--norm-eps"),
    ("--moe-aux-weight with --init of a dense checkpoint", init("--moe-aux-weight", "0.1"), "--moe-aux-weight"),
    ("--tokenizer with --resume", resume("--tokenizer", "words"), "--tokenizer"),
    ("--vocab-size with --resume", resume("--vocab-size", "100"), "--vocab-size"),
    ("--tie-embeddings with --resume", resume("--tie-embeddings"), "--tie-embeddings"),
    ("--lr with --resume", resume("--lr", "0.1"), "--lr"),
    ("--context-length with --resume", resume("--context-length", "16"), "--context-length"),
    ("--overwrite with --resume", resume("--overwrite"), "--overwrite"),
    ("--tokenizer-model with --resume", resume("--tokenizer-model", "bpe/tokenizer.model"), "--tokenizer-model"),
    ("--exact-reduction without mpirun", lm("--exact-reduction"), "--exact-reduction"),
    ("--no-overlap without mpirun", lm("--no-overlap"), "--no-overlap"),
    ("--bucket-mb without mpirun", lm("--bucket-mb", "2"), "--bucket-mb"),
    ("--comm-timeout without mpirun", lm("--comm-timeout", "30"), "--comm-timeout"),
    ("--activation-checkpointing on with one layer (every layer but the last is none)",
     lm("--activation-checkpointing", "on"), "--activation-checkpointing"),
]

OTHERS = [
    ("generate --top-k with --temperature 0", generate("--temperature", "0", "--top-k", "5"), "--top-k"),
    ("generate --top-p with --temperature 0", generate("--temperature", "0", "--top-p", "0.9"), "--top-p"),
    ("generate --seed with --temperature 0", generate("--temperature", "0", "--seed", "3"), "--seed"),
    ("generate --seed with --temperature 0 and --json", generate("--temperature", "0", "--seed", "3", "--json"),
     "--seed"),
    ("generate --seed with --top-k 1, which always takes the most likely token", generate("--top-k", "1", "--seed", "3"),
     "--seed"),
    ("generate --no-cache of a linear-attention model, which keeps no cache",
     generate("--no-cache", checkpoint="linear"), "--no-cache"),
    ("eval of a language model with --symbols", ["tapegrad", "eval", "--checkpoint", "run", "--data", "held_out.txt",
                                                  "--symbols", "5"], "--symbols"),
    ("eval of a language model with --seed", ["tapegrad", "eval", "--checkpoint", "run", "--data", "held_out.txt",
                                               "--seed", "5"], "--seed"),
    ("eval of a language model with --valid-size", ["tapegrad", "eval", "--checkpoint", "run", "--data",
                                                     "held_out.txt", "--valid-size", "5"], "--valid-size"),
    ("eval of a language model with --min-len", ["tapegrad", "eval", "--checkpoint", "run", "--data", "held_out.txt",
                                                  "--min-len", "2"], "--min-len"),
    ("eval of a classifier on TSV data with --max-len", ["tapegrad", "eval", "--checkpoint", "classifier", "--data",
                                                         "data.tsv", "--max-len", "9"], "--max-len"),
    ("eval of a classifier on TSV data with --seed", ["tapegrad", "eval", "--checkpoint", "classifier", "--data",
                                                      "data.tsv", "--seed", "9"], "--seed"),
    ("eval of a language model with --task", ["tapegrad", "eval", "--checkpoint", "run", "--task", "majority"],
     "--task"),
    ("gradcheck --json with --list", ["tapegrad", "gradcheck", "--list", "--json"], ("--json", "--list")),
]


def cases(fixtures):
    out = []
    for what, argv, flag in TRAIN:
        out.append(Case(GROUP, f"train refuses {what}", argv,
                        [refused(flag, exit=(1, 2)), absent("new"), untouched("run")], setup=setup_all))
    for what, argv, flag in OTHERS:
        out.append(Case(GROUP, f"{what} is refused", argv, [refused(flag, exit=(1, 2)), untouched("run")],
                        setup=setup_all))
    # The accepted side: the same flags where they do have an effect, so a refusal above is about the mode.
    out += [
        Case(GROUP, "train accepts --vocab-size with --tokenizer bpe", lm("--tokenizer", "bpe", "--vocab-size", "70"),
             [succeeded()], setup=setup_all),
        Case(GROUP, "train accepts --tokenizer-model with --tokenizer bpe",
             lm("--tokenizer", "bpe", "--tokenizer-model", "bpe/tokenizer.model"), [succeeded()], setup=setup_all),
        Case(GROUP, "generate accepts --top-k, --top-p and --seed when sampling",
             generate("--temperature", "0.8", "--top-k", "5", "--top-p", "0.9", "--seed", "3"), [succeeded()],
             setup=setup_all),
    ]
    return out
