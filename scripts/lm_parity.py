#!/usr/bin/python3
"""`make bench-lm`: the character language model trained by tapegrad and by PyTorch on the fortunes corpus.

1. The corpus: scripts/fortunes_corpus.sh (every text file of Debian's fortunes package, sorted), or --corpus.
2. `tapegrad train --task lm` with the character model (d_model 128, 4 heads, d_ff 512, 4 layers, context
   128, pre-LN, GELU, learned positions, dropout 0), batch 32, AdamW (lr --lr, weight decay 0.01 on every
   parameter, betas 0.9/0.999, eps 1e-8), 50 warm-up steps then cosine to 0, for --steps steps, validated
   once at the end (--eval-every = --steps).
3. The same model in PyTorch 1.13 (nn.TransformerEncoder, norm_first, gelu, a final LayerNorm, a causal
   mask; parameter names as nn/language_model.h's), from the run's tokenizer.json so that the ids are the
   same: the same held-out end of the text (the last 10% of its tokens), the same validation windows (T + 1
   tokens every T tokens: every token but the first predicted once), the same batch, optimizer, schedule and
   steps. Its training windows are drawn at uniform random starts as tapegrad's are, from its own generator;
   its initial weights are its own draw of the same (PyTorch's default) initialisation, built as a PyTorch
   user builds it: nn.TransformerEncoder deep-copies the layer it is given, so its layers start equal, where
   tapegrad draws each layer's weights.
4. Both final validation bits per character, computed the same way (the mean next-token loss over every
   validation token / ln 2 / the validation text's characters per token), and both training tokens/s
   (steps × batch × T / the seconds spent in training steps, validation and checkpoints excluded), on the
   same threads (--threads, default every core).

The issue's bar: bits per character within 0.05 of PyTorch's, and tapegrad at >= 1.5x PyTorch's tokens/s.
Exits 1 when either is missed (a busy machine can miss the second: the wall times are printed to judge).

    /usr/bin/python3 scripts/lm_parity.py path/to/tapegrad [--steps 600] [--corpus FILE] [--threads N]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS_SCRIPT = os.path.join(HERE, "fortunes_corpus.sh")

# The character model. lr 1e-3 rather than train's default 5e-3, which suits the small classifiers of the
# built-in tasks: 1e-3 is the usual AdamW rate of a small character transformer (nanoGPT's
# shakespeare_char config uses it for a larger model), well inside the stable range, so that the two runs
# differ by their random windows and initial draws, not by how near each came to a loss spike.
B, T, C, H, F, L = 32, 128, 128, 4, 512, 4
WARMUP, WEIGHT_DECAY, VALID_FRACTION = 50, 0.01, 0.1
BAR_BPC, BAR_SPEED = 0.05, 1.5


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tapegrad", help="the tapegrad executable")
    p.add_argument("--steps", type=int, default=600, help="training steps of each (default 600)")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default 1e-3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="threads of both (default 0: every core)")
    p.add_argument("--corpus", help="a UTF-8 text instead of the fortunes corpus")
    p.add_argument("--keep", help="keep tapegrad's run directory here (default: a temporary one)")
    a = p.parse_args()
    if a.steps <= WARMUP:
        p.error(f"--steps must be more than the {WARMUP} warm-up steps")
    if a.threads < 0:
        p.error("--threads must be >= 0")
    return a


def lr_at(step, base, total):
    """optim/schedule.h's warm-up then cosine to 0 (total = the run's steps)."""
    if step < WARMUP:
        return base * (step + 1) / WARMUP
    p = (step - WARMUP) / (total - WARMUP)
    return base * 0.5 * (1 + math.cos(math.pi * p))


def run_tapegrad(a, corpus, out):
    cmd = [a.tapegrad, "train", "--task", "lm", "--data", corpus, "--context-length", str(T), "--d-model", str(C),
           "--heads", str(H), "--ff", str(F), "--layers", str(L), "--norm-first", "--activation", "gelu",
           "--positional", "learned", "--dropout", "0", "--batch-size", str(B), "--lr", str(a.lr),
           "--weight-decay", str(WEIGHT_DECAY), "--warmup", str(WARMUP), "--schedule", "cosine", "--steps", str(a.steps),
           "--eval-every", str(a.steps), "--seed", str(a.seed), "--threads", str(a.threads), "--out", out,
           "--overwrite", "--json"]
    print("tapegrad: " + " ".join(cmd[1:]), flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"lm_parity: tapegrad train failed ({proc.returncode}):\n{proc.stderr}")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    return summary, wall


def run_pytorch(a, text, tokenizer, threads):
    """The same training in PyTorch; returns (validation bpc, mean validation loss, training tokens/s, wall s)."""
    # Threads before torch loads: its products run in OpenBLAS, whose pool only these variables reach.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch
    import torch.nn.functional as F_
    # After torch: importing the twin sets the thread variables from its own --threads (1 when absent), which
    # would reach OpenBLAS only if it loaded torch first.
    sys.path.insert(0, os.path.join(HERE, "..", "bench"))
    from train_step_torch import LanguageModel

    start_wall = time.perf_counter()
    torch.set_num_threads(threads)
    torch.manual_seed(a.seed)
    if tokenizer["kind"] != "characters":
        sys.exit(f"lm_parity: tokenizer.json is of kind '{tokenizer['kind']}', this script reads characters only")
    tokens = tokenizer["tokens"]  # by id; tokens[0] is <unk>
    ids_of = {t: i for i, t in enumerate(tokens)}
    ids = [ids_of.get(ch, 0) for ch in text]  # a character tokenizer: one token a code point
    held_out = int(len(ids) * VALID_FRACTION)  # training_stream.cpp's load_text_data
    train = torch.tensor(ids[:len(ids) - held_out], dtype=torch.int64)
    valid = ids[len(ids) - held_out:]
    # Characters per token of the validation text as tapegrad decodes it (<unk> reads "<unk>").
    chars_per_token = sum(len(tokens[i]) for i in valid) / len(valid)
    V = len(tokens)

    model = LanguageModel(V, C, H, F, L, T)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=WEIGHT_DECAY)
    windows = torch.Generator().manual_seed(a.seed)
    offsets = torch.arange(T + 1)
    train_seconds = 0.0
    for step in range(a.steps):
        t0 = time.perf_counter()
        starts = torch.randint(len(train) - T, (B, 1), generator=windows)  # windows of T + 1 inside the text
        batch = train[starts + offsets]
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, a.lr, a.steps)
        logits = model(batch[:, :-1])
        loss = F_.cross_entropy(logits.reshape(B * T, V), batch[:, 1:].reshape(B * T))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_value = loss.item()
        train_seconds += time.perf_counter() - t0
        if (step + 1) % 100 == 0 or step + 1 == a.steps:
            print(f"pytorch  step {step + 1}/{a.steps}: loss {loss_value:.4f}, "
                  f"{(step + 1) * B * T / train_seconds:.0f} tokens/s", flush=True)

    # consecutive_windows: T + 1 tokens starting every T tokens; the last holds what is left (at least 2).
    model.eval()
    loss_sum, count = 0.0, 0
    starts = list(range(0, len(valid) - 1, T))
    with torch.no_grad():
        full = [s for s in starts if s + T + 1 <= len(valid)]
        for i in range(0, len(full), 64):
            batch = torch.tensor([valid[s:s + T + 1] for s in full[i:i + 64]], dtype=torch.int64)
            logits = model(batch[:, :-1]).double()
            loss_sum += F_.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1), reduction="sum").item()
            count += batch[:, 1:].numel()
        for s in starts[len(full):]:  # the short last window
            batch = torch.tensor([valid[s:]], dtype=torch.int64)
            logits = model(batch[:, :-1]).double()
            loss_sum += F_.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1), reduction="sum").item()
            count += batch.shape[1] - 1
    assert count == len(valid) - 1, (count, len(valid))
    loss = loss_sum / count
    return loss / math.log(2) / chars_per_token, loss, a.steps * B * T / train_seconds, time.perf_counter() - start_wall


def main():
    a = parse_args()
    threads = a.threads or os.cpu_count()
    with tempfile.TemporaryDirectory(prefix="lm_parity_") as tmp:
        corpus = a.corpus
        if corpus is None:
            corpus = os.path.join(tmp, "fortunes.txt")
            subprocess.run(["sh", CORPUS_SCRIPT, corpus], check=True)
        with open(corpus, encoding="utf-8") as f:
            text = f.read()
        out = a.keep or os.path.join(tmp, "run")
        ours, our_wall = run_tapegrad(a, corpus, out)
        with open(os.path.join(out, "tokenizer.json"), encoding="utf-8") as f:
            tokenizer = json.load(f)
        our_bpc = ours["final_valid_bits_per_character"]
        our_tokens = ours["train_steps_per_second"] * B * T
        print(f"tapegrad {ours['steps']} steps: valid loss {ours['final_valid_loss']:.4f}, {our_bpc:.4f} bits per "
              f"character, {our_tokens:.0f} training tokens/s ({ours['train_seconds']:.1f} s training, "
              f"{our_wall:.1f} s wall)", flush=True)
        their_bpc, their_loss, their_tokens, their_wall = run_pytorch(a, text, tokenizer, threads)
    import torch
    print(f"pytorch  {a.steps} steps: valid loss {their_loss:.4f}, {their_bpc:.4f} bits per character, "
          f"{their_tokens:.0f} training tokens/s ({their_wall:.1f} s wall)  [torch {torch.__version__}]")
    difference, speed = our_bpc - their_bpc, our_tokens / their_tokens
    bpc_ok, speed_ok = abs(difference) <= BAR_BPC, speed >= BAR_SPEED
    print(f"bits per character: tapegrad {our_bpc:.4f}, PyTorch {their_bpc:.4f}, difference {difference:+.4f} "
          f"({'within' if bpc_ok else 'NOT within'} {BAR_BPC})")
    print(f"training tokens/s on {threads} thread{'s' if threads > 1 else ''}: tapegrad {our_tokens:.0f}, "
          f"PyTorch {their_tokens:.0f}: {speed:.2f}x ({'>=' if speed_ok else 'below'} {BAR_SPEED}x)")
    sys.exit(0 if bpc_ok and speed_ok else 1)


if __name__ == "__main__":
    main()
