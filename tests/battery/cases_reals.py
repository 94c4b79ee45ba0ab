"""Class 2: real values float32 cannot hold, or that make a layer's output independent of its input.

docs/reliability.md, "Real settings" and "Every number goes through one strict parser": every real flag of
every subcommand is read strictly (a malformed number is a parse error, exit 2; nan and inf are numbers
that each flag's range refuses, exit 1), refuses what float32 holds as infinite, 0 or a denormal, and
each flag's own range; the same values in config.json's settings and trainer.json's options are refused
by key by every reader.
"""

from harness import Case, absent, refused, succeeded, untouched
from run_edits import copy_corpus, edited_run_setup, set_raw_number

GROUP = "2 reals"

BASE_MODEL = ["--d-model", "16", "--heads", "2", "--ff", "32", "--layers", "1", "--batch-size", "8", "--threads", "1"]

# Every value below is refused by every real flag. Malformed text is a parse error (exit 2); the
# reading of a value a double holds and float32 does not is not said to be a parse error or a range
# error, so either exit is taken.
MALFORMED = [("0x1p3", "a hex float"), ("1.5x", "trailing junk"), ("+1", "a leading +"), ("1e", "a bare exponent"),
             (" 0.5", "a leading space"), ("", "an empty value")]
NONFINITE = [("nan", "nan"), ("inf", "inf"), ("-inf", "-inf")]
FLOAT32_LIMITS = [("1e300", "1e300, infinite in float32"), ("-1e300", "-1e300"),
                  ("1e-300", "1e-300, 0 in float32"), ("-1e-39", "-1e-39, a float32 denormal"),
                  ("1e400", "1e400, beyond a double"), ("1e-400", "1e-400, below a double's smallest")]

# flag -> (arguments it needs to apply, values outside its own range, a value inside it)
TRAIN_REALS = {
    "--valid-fraction": ([], ["0", "1", "-0.5"], "0.2"),
    "--dropout": ([], ["1", "-0.1"], "0.1"),
    "--lr": ([], ["-1"], "0.001"),
    "--weight-decay": ([], ["-1"], "0.1"),
    "--momentum": (["--optimizer", "sgd"], ["1", "-0.1"], "0.5"),
    "--clip-grad": ([], ["-1"], "1"),
    "--target-acc": ([], ["-0.5", "1.5"], "0.9"),
    "--bucket-mb": ([], ["0", "-1"], None),      # mpirun's: its accepted side needs mpirun
    "--comm-timeout": ([], ["0", "-1"], None),
    "--temperature": ([], ["0", "-1", "1e-4", "2000"], "2"),
    "--attention-eps": (["--attention", "linear"], ["0", "-1", "2"], "0.001"),
    "--norm-eps": ([], ["0", "-1", "2"], "0.001"),
    "--moe-aux-weight": (["--ffn", "moe"], ["-1", "101"], "0.5"),
}

GENERATE_REALS = {
    "--temperature": (["-1", "1e-4", "2000"], "0.5"),
    "--top-p": (["0", "-0.1", "1.5"], "0.9"),
}


def train_argv(flag, needs, value):
    return ["tapegrad", "train", "--task", "lm", "--data", "corpus.txt", "--out", "new", "--steps", "2",
            *BASE_MODEL, *needs, flag, value]


def generate_argv(flag, value):
    return ["tapegrad", "generate", "--checkpoint", "run", "--prompt", "the ", "--max-new-tokens", "4", flag, value]


def value_sets(own_range):
    return ([(v, what, 2) for v, what in MALFORMED] + [(v, what, 1) for v, what in NONFINITE]
            + [(v, what, (1, 2)) for v, what in FLOAT32_LIMITS] + [(v, v, 1) for v in own_range])


def flag_cases():
    out = []
    for flag, (needs, own_range, good) in TRAIN_REALS.items():
        for value, what, exit_code in value_sets(own_range):
            out.append(Case(GROUP, f"train refuses {flag} {what}", train_argv(flag, needs, value),
                            [refused(flag, exit=exit_code), absent("new")], setup=copy_corpus))
        if good is not None:
            out.append(Case(GROUP, f"train accepts {flag} {good}", train_argv(flag, needs, good), [succeeded()],
                            setup=copy_corpus))
    for flag, (own_range, good) in GENERATE_REALS.items():
        for value, what, exit_code in value_sets(own_range):
            out.append(Case(GROUP, f"generate refuses {flag} {what}", generate_argv(flag, value),
                            [refused(flag, exit=exit_code), untouched("run")],
                            setup=edited_run_setup("chars8")))
        out.append(Case(GROUP, f"generate accepts {flag} {good}", generate_argv(flag, good), [succeeded()],
                        setup=edited_run_setup("chars8")))
    return out


# (fixture, config.json key path, what the message names, values outside the range)
CONFIG_REALS = [
    ("chars8", ["settings", "norm", "eps"], "norm.eps", ["1e300", "0", "-1", "2", "1e-300", "1e-50", "1e400"]),
    ("chars8", ["settings", "attention", "temperature"], "temperature", ["1e300", "0", "-1", "1e-4", "2000", "1e-300"]),
    ("chars8", ["dropout"], "dropout", ["1", "-0.5", "1e300"]),
    ("linear8", ["settings", "attention", "eps"], "eps", ["0", "2", "1e300"]),
]


def config_readers():
    return [
        ("generate", ["tapegrad", "generate", "--checkpoint", "run", "--prompt", "the ", "--max-new-tokens", "4"],
         "config.json"),
        ("eval", ["tapegrad", "eval", "--checkpoint", "run", "--data", "held_out.txt"], "config.json"),
        ("train --resume", ["tapegrad", "train", "--resume", "run", "--steps", "20"], ("config.json", "trainer.json")),
        ("train --init", ["tapegrad", "train", "--task", "lm", "--init", "run", "--data", "corpus.txt", "--out", "new",
                          "--steps", "2", "--batch-size", "8", "--threads", "1"], "config.json"),
    ]


TRAINER_REALS = [
    (["options", "lr"], "options.lr", ["1e300", "-1", "1e-300", "1e400"]),
    (["options", "weight_decay"], "options.weight_decay", ["-1", "1e300"]),
    (["options", "momentum"], "options.momentum", ["1", "-0.5", "1e300"]),
    (["options", "clip_grad"], "options.clip_grad", ["-1", "1e300"]),
    (["options", "target_acc"], "options.target_acc", ["2", "-1"]),
    (["options", "valid_fraction"], "options.valid_fraction", ["0", "1", "1e-300"]),
    (["options", "model", "dropout"], "dropout", ["1", "-0.1"]),
    (["options", "model", "settings", "norm", "eps"], "norm.eps", ["1e300", "0"]),
    (["options", "model", "settings", "attention", "temperature"], "temperature", ["1e-300", "1e300"]),
    (["schedule", "base_lr"], "schedule.base_lr", ["1e300", "-1"]),
    (["schedule", "min_lr"], "schedule.min_lr", ["-1", "1e300"]),
]


def file_cases():
    out = []
    for fixture, keys, named, values in CONFIG_REALS:
        for value in values:
            for reader, argv, file_named in config_readers():
                checks = [refused(file_named, named), untouched("run")]
                if reader == "train --init":
                    checks.append(absent("new"))
                out.append(Case(GROUP, f"{reader} refuses config.json's {'.'.join(keys)} = {value} ({fixture})", argv,
                                checks, setup=edited_run_setup(fixture, set_raw_number("config.json", keys, value))))
    for keys, named, values in TRAINER_REALS:
        for value in values:
            out.append(Case(GROUP, f"train --resume refuses trainer.json's {'.'.join(keys)} = {value}",
                            ["tapegrad", "train", "--resume", "run", "--steps", "20"],
                            [refused("trainer.json", named), untouched("run")],
                            setup=edited_run_setup("chars8", set_raw_number("trainer.json", keys, value))))
    return out


def cases(fixtures):
    return flag_cases() + file_cases()
