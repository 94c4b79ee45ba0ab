#!/usr/bin/python3
"""PyTorch twin of `tapegrad bench` (train/cli/bench.cpp): the same model, batch, optimizer and timing.

--model classifier (the default; bench's small, medium and long): embedding (padding_idx 0) + learned
positions, nn.TransformerEncoder of nn.TransformerEncoderLayer(batch_first=True, post-LN, relu, dropout 0),
mean pooling over the non-pad positions, a Linear head; cross_entropy over the rows, on a fixed batch.
--model lm (bench's lm): embedding + learned positions, nn.TransformerEncoder of
nn.TransformerEncoderLayer(batch_first=True, norm_first=True, gelu, dropout 0) with a final LayerNorm, run
with a causal mask, a Linear(C, V, bias=False) head; cross_entropy of the next token at every position, on
windows of T + 1 tokens at random starts of a fixed text (train/cli/bench.cpp's language_model_bench).
Either way AdamW(lr 5e-3, weight_decay 0.01 on every parameter, as tapegrad's). One step: forward, loss,
zero_grad, backward, step. The batch and the timing follow train/cli/bench.cpp's run_bench exactly.
--unpadded: the classifier's rows are all T tokens and no padding mask is passed (issue 39's headline rows:
equal work on both sides, since tapegrad skips the pads of its length groups and PyTorch computes them).

Runs under Debian's PyTorch 1.13 (/usr/bin/python3) and PyTorch 2 (build/bench-venv, bench/peers/install.sh).
On PyTorch 2 nn.MultiheadAttention's training path (the one nn.TransformerEncoderLayer takes: its fast path
is inference only) calls F.scaled_dot_product_attention, which runs the CPU flash-attention kernel forward
and backward (aten::_scaled_dot_product_flash_attention_for_cpu, seen in torch.profiler on 2.15) with the
padding or causal mask as its attn_mask; 1.13 runs the same layer as bmm, softmax, bmm. --compile (PyTorch 2
only): torch.compile(model) with inductor; the first step, which compiles forward and backward, is a warm-up
step and its extra time is printed apart (compile_s), never in steps/s.
"""
import argparse
import inspect
import os
import resource
import sys
import time


def _threads_from_argv():
    """The --threads value (default 1), read before argparse runs: it must be known before torch loads."""
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return "1"


# As many compute threads as tapegrad's benchmark uses: torch.set_num_threads sets torch's own pool, but
# this Debian torch does its matrix products in OpenBLAS (BLAS_INFO=generic), whose pool only these
# variables reach, and only before the library loads (left alone, it runs on every core).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _threads_from_argv()

import torch  # noqa: E402  (after the thread settings)
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def rss_mib():
    with open("/proc/self/statm") as f:
        resident = int(f.read().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE") / (1024.0 * 1024.0)


class SequenceClassifier(nn.Module):
    def __init__(self, vocab, d_model, heads, d_ff, layers, context, classes):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model, padding_idx=0)
        self.pos_embed = nn.Embedding(context, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout=0.0, activation="relu",
                                           batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, classes)

    def forward(self, ids, pad):  # ids, pad: (B, T) -> logits (B, classes); pad None: no position is a pad
        T = ids.shape[1]
        x = self.embed(ids) + self.pos_embed.weight[:T]
        if pad is None:  # no mask at all, so that attention may take its unmasked kernels
            return self.head(self.encoder(x).mean(1))
        x = self.encoder(x, src_key_padding_mask=pad)
        summed = x.masked_fill(pad.unsqueeze(-1), 0.0).sum(1)
        counts = (~pad).sum(1, keepdim=True).clamp(min=1).to(x.dtype)
        return self.head(summed / counts)


class LanguageModel(nn.Module):
    """nn/language_model.h's model with its parameter names: embed, pos_embed, encoder (final norm), head."""

    def __init__(self, vocab, d_model, heads, d_ff, layers, context, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos_embed = nn.Embedding(context, d_model)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout=dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab, bias=False)
        # -inf above the diagonal: position t attends to positions 0..t (additive, as nn.Transformer's
        # generate_square_subsequent_mask)
        self.register_buffer("causal", torch.triu(torch.full((context, context), float("-inf")), diagonal=1),
                             persistent=False)
        # PyTorch 2 takes is_causal=True as the word that the mask is causal: attention then runs its causal
        # kernel, and torch.compile no graph break (without it, the encoder compares the mask with a causal
        # one through Tensor.item). 1.13's encoder has no such argument.
        self.causal_flag = ({"is_causal": True} if "is_causal" in inspect.signature(self.encoder.forward).parameters
                            else {})

    def forward(self, ids):  # ids (B, T) -> logits (B, T, V)
        T = ids.shape[1]
        x = self.dropout(self.embed(ids) + self.pos_embed.weight[:T])
        return self.head(self.encoder(x, mask=self.causal[:T, :T], **self.causal_flag))


def bench_text(vocab, T):
    """language_model_bench's text: token i is (5·i + i/7) mod vocab, max(2^16, 2(T + 1)) tokens."""
    n = max(1 << 16, 2 * (T + 1))
    i = torch.arange(n, dtype=torch.int64)
    return (5 * i + i // 7) % vocab


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # tapegrad train's names; the older --d-ff, --seq and --batch (tapegrad bench's before) are aliases
    for names, dest, default in [(["d-model"], "d_model", 32), (["heads"], "heads", 2), (["ff", "d-ff"], "d_ff", 64),
                                 (["layers"], "layers", 2), (["context-length", "seq"], "seq", 32),
                                 (["batch-size", "batch"], "batch", 64), (["vocab"], "vocab", 11),
                                 (["classes"], "classes", 8), (["warmup"], "warmup", 20), (["steps"], "steps", 300),
                                 (["repeats"], "repeats", 5), (["threads"], "threads", 1)]:
        p.add_argument(*("--" + name for name in names), dest=dest, type=int, default=default)
    p.add_argument("--model", choices=["classifier", "lm"], default="classifier",
                   help="the classifier on a fixed batch, or the language model on random windows (--vocab: its V)")
    p.add_argument("--unpadded", action="store_true",
                   help="the classifier's rows all T tokens, no padding mask (the default: rows of T/4..T tokens)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (inductor; PyTorch 2): its compile time printed apart, not timed")
    a = p.parse_args()
    if a.steps % a.repeats:
        p.error("--steps must be a multiple of --repeats")
    if a.compile and not hasattr(torch, "compile"):
        p.error(f"--compile needs PyTorch 2 (torch.compile); this is torch {torch.__version__}")
    if a.compile and a.warmup < 1:
        p.error("--compile needs --warmup >= 1: the first step compiles, and must not be timed")
    start_rss = rss_mib()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    B, T = a.batch, a.seq
    if a.model == "lm":
        text = bench_text(a.vocab, T)
        offsets = torch.arange(T + 1)
        windows = torch.Generator().manual_seed(1)
        model = LanguageModel(a.vocab, a.d_model, a.heads, a.d_ff, a.layers, T)

        def loss_of_batch():
            # B windows of T + 1 tokens at uniform starts in [0, n - T - 1], as tapegrad's bench draws them
            starts = torch.randint(len(text) - T, (B, 1), generator=windows)
            tokens = text[starts + offsets]  # (B, T + 1)
            logits = run_model(tokens[:, :-1])
            return F.cross_entropy(logits.reshape(B * T, a.vocab), tokens[:, 1:].reshape(B * T))
    else:
        min_len = T // 4
        ids = torch.zeros(B, T, dtype=torch.int64)
        pad = torch.zeros(B, T, dtype=torch.bool)
        for b in range(B):
            length = T if b == 0 or a.unpadded else min_len + (31 * b) % (T - min_len + 1)
            for t in range(T):
                if t >= length:
                    pad[b, t] = True
                else:
                    ids[b, t] = 3 + (17 * b + 5 * t) % (a.vocab - 3)
        if a.unpadded:
            pad = None
        targets = torch.tensor([(7 * b) % a.classes for b in range(B)], dtype=torch.int64)
        model = SequenceClassifier(a.vocab, a.d_model, a.heads, a.d_ff, a.layers, T, a.classes)

        def loss_of_batch():
            return F.cross_entropy(run_model(ids, pad), targets)

    model.train()
    # the parameters are the module's either way: torch.compile wraps it and shares them
    run_model = torch.compile(model) if a.compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    params = sum(p.numel() for p in model.parameters())

    loss_value, first_loss = 0.0, None

    def step():
        nonlocal loss_value, first_loss
        loss = loss_of_batch()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_value = loss.item()
        # against tapegrad's (`tapegrad bench --warmup 0 --steps 1`): the same work starts at about
        # ln(classes) or ln(V)
        first_loss = loss_value if first_loss is None else first_loss

    # When compiled, the first warm-up step's time is the compile's plus a step's.
    warmup_seconds = []
    for _ in range(a.warmup):
        t0 = time.perf_counter()
        step()
        warmup_seconds.append(time.perf_counter() - t0)
    chunk = a.steps // a.repeats
    rates, cpu_rates, total = [], [], 0.0
    for _ in range(a.repeats):
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(chunk):
            step()
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        total += seconds
        rates.append(chunk / seconds)
        cpu_rates.append(chunk / cpu)
    rates.sort()
    cpu_rates.sort()
    median, cpu_median = rates[len(rates) // 2], cpu_rates[len(cpu_rates) // 2]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB

    mode = "compiled" if a.compile else "eager"
    rows = "" if a.model == "lm" else (" unpadded" if a.unpadded else " padded")
    compile_seconds = max(0.0, warmup_seconds[0] - 1 / median) if a.compile else 0.0  # less a timed step
    print(f"pytorch   {mode} {a.model}{rows} d_model {a.d_model} heads {a.heads} d_ff {a.d_ff} layers {a.layers} T {T} batch {B} "
          f"params {params}: {a.steps} steps in {total:.3f} s, median {median:.1f} steps/s "
          f"(chunks {rates[0]:.1f}..{rates[-1]:.1f}), per CPU second {cpu_median:.1f}, first loss {first_loss:.4f}, final loss {loss_value:.4f}  "
          f"[torch {torch.__version__}]")
    if a.compile:
        print(f"pytorch   compile: first step {warmup_seconds[0]:.1f} s, {compile_seconds:.1f} s more than a timed step")
    print(f"pytorch   peak RSS {peak:.1f} MiB ({peak - start_rss:.1f} MiB above start-up, after import torch)")
    print(f"RESULT steps_per_s={median:.3f} tokens_per_s={median * B * T:.1f} steps_per_cpu_s={cpu_median:.3f} peak_rss_mib={peak:.1f} rss_growth_mib={peak - start_rss:.1f} "
          f"first_loss={first_loss:.6f} final_loss={loss_value:.6f} compile_s={compile_seconds:.3f}")


if __name__ == "__main__":
    main()
