"""Class 3: generation at every context length a run can be trained with (docs/language_models.md,
"generate" and "Generation with a KV cache"; docs/reliability.md, "Generation works at every context").

The promises: generate prints the prompt and then --max-new-tokens tokens; --no-cache gives the same text;
the same seed gives the same text; <unk> is never drawn; a prompt of no token, longer than the context or
not UTF-8 is refused by --prompt; a prompt with characters outside the vocabulary is continued, with a note.
"""

import json
import math

from harness import Case, contract_violations, custom, refused, run_process, succeeded, untouched
from run_edits import edited_run_setup

GROUP = "3 generation"

CONTEXTS = (1, 2, 3, 8)
KINDS = ("chars", "words", "bpe")
# A prompt of one token (or of the whole context, for words) and one longer than any context here.
FITTING_PROMPT = {"chars": lambda c: "the cat sat"[:c], "words": lambda c: " ".join("the cat sat".split()[:c]),
                  "bpe": lambda c: "t" if c < 8 else "the "}
TOO_LONG_PROMPT = "the cat sat on a mat and then ran to see her old dog who was not home so she went"


def generate(prompt, tokens, *extra):
    return ["tapegrad", "generate", "--checkpoint", "run", f"--prompt={prompt}", "--max-new-tokens", str(tokens),
            *extra]


def exact_character_count(prompt, tokens):
    """A characters model writes the prompt, one code point a token, and a final newline."""
    def check(result, work):
        text = result.stdout_text()
        if not text.startswith(prompt):
            return f"stdout does not start with the prompt {prompt!r}: {text[:80]!r}"
        if not text.endswith("\n") or len(text) - 1 - len(prompt) != tokens:
            return f"expected the prompt, {tokens} characters and a newline; got {len(text)} characters: {text[:80]!r}"
        if "<unk>" in text[len(prompt):]:
            return f"<unk> was drawn: {text!r}"
        return None
    return custom(check)


def json_tokens(tokens):
    def check(result, work):
        try:
            doc = json.loads(result.stdout_text())
        except ValueError as error:
            return f"stdout is not one JSON object ({error}): {result.stdout[:200]!r}"
        new = doc.get("tokens", [])
        if len(new) != tokens:
            return f"--json lists {len(new)} new tokens, expected {tokens}"
        for token in new:
            if token.get("id") == 0:
                return f"<unk> (id 0) was drawn: {token}"
            log_prob = token.get("log_prob")
            if not isinstance(log_prob, (int, float)) or not math.isfinite(log_prob) or log_prob > 1e-9:
                return f"a token's log_prob is not a finite log-probability: {token}"
        return None
    return custom(check)


def and_again(*second_extra, same=True):
    """A runner: the command, then the same command with second_extra added; the check compares stdouts."""
    def runner(case, work, argv):
        first = run_process(argv, work.dir, case.timeout)
        second = run_process(argv + list(second_extra), work.dir, case.timeout)
        work.state["second"] = second
        return first
    def check(result, work):
        second = work.state["second"]
        problems = contract_violations(second)
        if problems or second.returncode != 0:
            return f"the second run ({' '.join(second_extra)}) exited {second.returncode}: {problems} {second.stderr[-300:]!r}"
        equal = _same_output(result, second)
        if equal != same:
            return (f"with {' '.join(second_extra)} the output is {'not ' if same else ''}the same: "
                    f"{result.stdout[:120]!r} vs {second.stdout[:120]!r}")
        return None
    return runner, custom(check)


LOG_PROB_TOLERANCE = 1e-5


def _same_output(first, second):
    """The same stdout; for --json the same but for its timing and cache mode, and log-probabilities within
    1e-5: the cached and the recomputed forwards sum in other orders, so they agree to float32 rounding."""
    try:
        docs = [json.loads(r.stdout_text()) for r in (first, second)]
    except ValueError:
        return first.stdout == second.stdout
    log_probs = []
    for doc in docs:
        doc.pop("seconds", None)
        doc.pop("kv_cache", None)
        log_probs.append([token.pop("log_prob", None) for token in doc.get("tokens", [])])
    if docs[0] != docs[1] or len(log_probs[0]) != len(log_probs[1]):
        return False
    return all(isinstance(a, float) and isinstance(b, float) and abs(a - b) <= LOG_PROB_TOLERANCE
               for a, b in zip(*log_probs))


def context_cases(kind, context):
    fixture = f"{kind}{context}"
    setup = edited_run_setup(fixture)
    prompt = FITTING_PROMPT[kind](context)
    where = f"{kind} context {context}"
    out = []
    count_check = [exact_character_count(prompt, 40)] if kind == "chars" else []
    out.append(Case(GROUP, f"generate writes the prompt and 40 tokens ({where})", generate(prompt, 40, "--seed", "1"),
                    [succeeded(stdout_has=[prompt] if kind == "chars" else []), *count_check, untouched("run")],
                    setup=setup))
    for mode, extra in (("sampled", ["--seed", "3"]), ("greedy", ["--temperature", "0"])):
        runner, check = and_again("--no-cache")
        out.append(Case(GROUP, f"generate --no-cache gives the cached text, {mode} ({where})",
                        generate(prompt, 60, *extra), [succeeded(), check], setup=setup, runner=runner))
    runner, check = and_again("--no-cache")
    out.append(Case(GROUP, f"generate --json --no-cache gives the cached tokens and log-probabilities ({where})",
                    generate(prompt, 30, "--seed", "5", "--json"), [succeeded(), json_tokens(30), check],
                    setup=setup, runner=runner))
    long_count = [exact_character_count(prompt, 3000)] if kind == "chars" else []
    out.append(Case(GROUP, f"generate runs 3000 tokens past many window restarts ({where})",
                    generate(prompt, 3000, "--seed", "2"), [succeeded(), *long_count], setup=setup))
    out.append(Case(GROUP, f"generate refuses a prompt longer than the context ({where})",
                    generate(TOO_LONG_PROMPT, 5), [refused("--prompt"), untouched("run")], setup=setup))
    out.append(Case(GROUP, f"generate refuses an empty prompt ({where})",
                    ["tapegrad", "generate", "--checkpoint", "run", "--prompt", "", "--max-new-tokens", "5"],
                    [refused("--prompt"), untouched("run")], setup=setup))
    out.append(Case(GROUP, f"generate refuses a prompt of invalid UTF-8 ({where})",
                    ["tapegrad", "generate", "--checkpoint", "run", "--prompt", "t\udcff", "--max-new-tokens", "5"],
                    [refused("--prompt"), untouched("run")], setup=setup))
    out.append(Case(GROUP, f"generate continues a prompt outside the vocabulary, with a note naming --prompt ({where})",
                    generate("\u00e9" * min(context, 2) if kind != "words" else "\u00e9t\u00e9", 5, "--seed", "1"),
                    [succeeded(), custom(_unk_note)], setup=setup))
    return out


def _unk_note(result, work):
    text = result.stderr.decode("utf-8", "replace")
    if "--prompt" not in text or "<unk>" not in text:
        return f"no note on stderr naming --prompt and <unk>: {text[:300]!r}"
    return None


def seed_cases():
    setup = edited_run_setup("chars8")
    same_runner, same_check = and_again()
    other_runner, other_check = and_again("--seed", "8", same=False)  # the first run: the default seed
    return [
        Case(GROUP, "generate gives the same text for the same seed", generate("the ", 80, "--seed", "7"),
             [succeeded(), same_check], setup=setup, runner=same_runner),
        Case(GROUP, "generate gives another text for another seed", generate("the ", 80),
             [succeeded(), other_check], setup=setup, runner=other_runner),
        Case(GROUP, "generate refuses a prompt of only spaces for a words model", generate("   ", 5)
             , [refused("--prompt"), untouched("run")], setup=edited_run_setup("words8")),
        Case(GROUP, "generate --no-cache of a rope model gives the cached text",
             generate("the ", 60, "--seed", "4"), [succeeded(), and_again("--no-cache")[1]],
             setup=edited_run_setup("rope8"), runner=and_again("--no-cache")[0]),
        Case(GROUP, "generate of a linear-attention model writes 40 tokens",
             generate("the ", 40, "--seed", "4"), [succeeded(), exact_character_count("the ", 40)],
             setup=edited_run_setup("linear8")),
        Case(GROUP, "generate refuses --max-new-tokens 0", generate("the ", 0), [refused("--max-new-tokens")],
             setup=setup),
        Case(GROUP, "generate refuses --max-new-tokens -1", generate("the ", -1), [refused("--max-new-tokens")],
             setup=setup),
        Case(GROUP, "generate's time per token does not grow with the tokens already written (context 1)",
             generate("t", 5000, "--seed", "1"), [succeeded(), linear_time_check()],
             setup=edited_run_setup("chars1"), runner=linear_time_runner(40000)),
        Case(GROUP, "generate's time per token does not grow with the tokens already written (context 8)",
             generate("the ", 5000, "--seed", "1"), [succeeded(), linear_time_check()],
             setup=setup, runner=linear_time_runner(40000)),
    ]


# With the window bounded by the context, each new token costs one cached step (O(T·C), docs/language_models.md),
# so 8 times the tokens take about 8 times as long; 16 leaves room for a shared machine's noise.
GROWTH_ALLOWED = 16.0


def linear_time_runner(longer_tokens):
    """Runs the command, then the same with --max-new-tokens longer_tokens, keeping both times."""
    def runner(case, work, argv):
        first = run_process(argv, work.dir, case.timeout)
        longer = list(argv)
        longer[longer.index("--max-new-tokens") + 1] = str(longer_tokens)
        second = run_process(longer, work.dir, case.timeout)
        work.state["timing"] = (int(argv[argv.index("--max-new-tokens") + 1]), first.seconds, longer_tokens, second)
        return first
    return runner


def linear_time_check():
    def check(result, work):
        tokens, seconds, longer_tokens, second = work.state["timing"]
        if second.returncode != 0:
            return f"the run of {longer_tokens} tokens exited {second.returncode} after {second.seconds:.1f} s"
        allowed = GROWTH_ALLOWED * (longer_tokens / tokens) / 8 * max(seconds, 0.05)
        if second.seconds > allowed:
            return (f"{tokens} tokens took {seconds:.2f} s and {longer_tokens} took {second.seconds:.2f} s "
                    f"({second.seconds / max(seconds, 1e-3):.1f} times as long for {longer_tokens // tokens} times the "
                    f"tokens): the cost of a token grows with the text written")
        return None
    return custom(check)


def cases(fixtures):
    out = []
    for kind in KINDS:
        for context in CONTEXTS:
            out += context_cases(kind, context)
    return out + seed_cases()
