#!/usr/bin/env python3
"""JAX twin of `tapegrad bench` (train/cli/bench.cpp): the same math, batch, optimizer and timing, by hand.

--model classifier (bench's small, medium and long): token embedding (row 0 the pad: zero, and no gradient
reaches it) + learned positions, post-LN encoder layers (x = LN(x + attention(x)), x = LN(x + FFN(x)), relu
FFN), the pads masked as keys, mean pooling over the non-pad positions, a linear head, cross-entropy over the
rows, on bench's fixed batch. --model lm (bench's lm): token embedding + learned positions, pre-LN layers
(x = x + attention(LN(x)), x = x + FFN(LN(x)), exact-erf GELU), a final LayerNorm, causal attention, a head
without bias, the cross-entropy of the next token at every position, on windows of T + 1 tokens at uniform
random starts of bench's text, drawn inside the step. Attention is multi-head, q kᵀ / √D, with q, k, v and
output projections with biases, as PyTorch's nn.MultiheadAttention; the parameters are initialised as
PyTorch's modules are (embeddings N(0, 1), linear layers U(±1/√fan_in), LayerNorm 1 and 0), so the parameter
count and the first loss (about ln(classes) or ln(V)) can be checked against bench/train_step_torch.py's.

optax.adamw(lr 5e-3, weight decay 0.01 on every parameter, β 0.9 and 0.999, eps 1e-8: tapegrad's). The
whole step (forward, loss, gradients, AdamW update, the lm's window draw) is one jax.jit function, compiled
ahead of its first call so that its compile time is printed apart (compile_s) and never timed. Each step
waits for its loss (float(loss)), as tapegrad's and PyTorch's read theirs. Then warm-up steps and timed
chunks with the median chunk's rate, as run_bench; the last line is bench/compare.py's RESULT line.

    build/bench-venv/bin/python bench/train_step_jax.py --d-model 64 --heads 4 --ff 128 --layers 2 ...
"""
import argparse
import math
import os
import resource
import sys
import time


def _threads_from_argv():
    """The --threads value (default 1), read before jax loads: XLA sizes its pool when the backend starts."""
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return int(sys.argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return 1


# XLA's CPU backend runs on pools of every core it sees, and no flag of jax 0.10 keeps it to one: with
# --xla_cpu_multi_thread_eigen=false a "1 thread" run still used 1.8 CPU seconds a second. So the process
# is pinned to --threads cores (its pools then share them), as tapegrad's and PyTorch's pools are that size.
_THREADS = _threads_from_argv()
if 1 <= _THREADS < len(os.sched_getaffinity(0)):
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:_THREADS])
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402  (after the thread settings)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402


def rss_mib():
    with open("/proc/self/statm") as f:
        resident = int(f.read().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE") / (1024.0 * 1024.0)


def linear_params(key, fan_in, fan_out, bias=True):
    """PyTorch's nn.Linear initialisation: weight (fan_in, fan_out) and bias, each U(±1/√fan_in)."""
    bound = 1.0 / math.sqrt(fan_in)
    wkey, bkey = jax.random.split(key)
    p = {"w": jax.random.uniform(wkey, (fan_in, fan_out), jnp.float32, -bound, bound)}
    if bias:
        p["b"] = jax.random.uniform(bkey, (fan_out,), jnp.float32, -bound, bound)
    return p


def layer_norm_params(C):
    return {"g": jnp.ones((C,), jnp.float32), "b": jnp.zeros((C,), jnp.float32)}


def init_params(key, a, out_features, head_bias, final_norm):
    """The model's parameters: embed (V, C), pos_embed (T, C), one dict per layer, the final norm, the head."""
    C, F = a.d_model, a.d_ff
    keys = jax.random.split(key, 3 + a.layers)
    embed = jax.random.normal(keys[0], (a.vocab, C), jnp.float32)
    params = {"embed": embed.at[0].set(0.0) if a.model == "classifier" else embed,  # the classifier's pad row
              "pos_embed": jax.random.normal(keys[1], (a.seq, C), jnp.float32),
              "head": linear_params(keys[2], C, out_features, bias=head_bias), "layers": []}
    for k in keys[3:]:
        qkv, out, ff1, ff2 = jax.random.split(k, 4)
        params["layers"].append({"qkv": linear_params(qkv, C, 3 * C), "out": linear_params(out, C, C),
                                 "ff1": linear_params(ff1, C, F), "ff2": linear_params(ff2, F, C),
                                 "norm1": layer_norm_params(C), "norm2": layer_norm_params(C)})
    if final_norm:
        params["final_norm"] = layer_norm_params(C)
    return params


def linear(p, x):
    y = x @ p["w"]
    return y + p["b"] if "b" in p else y


def layer_norm(p, x, eps=1e-5):  # x: (..., C) -> (..., C)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p["g"] + p["b"]


def attention(p, x, heads, keep):
    """x: (B, T, C), keep: (B or 1, 1, T or 1, T) true where a query may see a key -> (B, T, C)."""
    B, T, C = x.shape
    D = C // heads
    q, k, v = jnp.split(linear(p["qkv"], x), 3, axis=-1)
    q, k, v = (t.reshape(B, T, heads, D).transpose(0, 2, 1, 3) for t in (q, k, v))  # (B, H, T, D)
    scores = (q / math.sqrt(D)) @ k.transpose(0, 1, 3, 2)  # (B, H, T, T)
    probs = jax.nn.softmax(jnp.where(keep, scores, -jnp.inf), axis=-1)
    return linear(p["out"], (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, C))


def feed_forward(p, x, activation):
    return linear(p["ff2"], activation(linear(p["ff1"], x)))


def classifier_loss(params, ids, keep_token, targets, heads):
    """ids, keep_token: (B, T) (keep_token false at pads); targets: (B,) -> the mean cross-entropy."""
    T = ids.shape[1]
    x = params["embed"][ids] * keep_token[..., None] + params["pos_embed"][:T]  # the pad row takes no gradient
    keep = keep_token[:, None, None, :]  # (B, 1, 1, T): the pads masked as keys
    for p in params["layers"]:  # post-LN
        x = layer_norm(p["norm1"], x + attention(p, x, heads, keep))
        x = layer_norm(p["norm2"], x + feed_forward(p, x, jax.nn.relu))
    weights = keep_token.astype(x.dtype)
    pooled = (x * weights[..., None]).sum(1) / jnp.maximum(weights.sum(1, keepdims=True), 1.0)
    logits = linear(params["head"], pooled)
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def language_model_loss(params, tokens, heads):
    """tokens: (B, T + 1) windows -> the mean cross-entropy of tokens[:, 1:] given each prefix."""
    inputs, next_tokens = tokens[:, :-1], tokens[:, 1:]
    T = inputs.shape[1]
    x = params["embed"][inputs] + params["pos_embed"][:T]
    causal = jnp.tril(jnp.ones((T, T), bool))[None, None]  # (1, 1, T, T): position t sees 0..t
    for p in params["layers"]:  # pre-LN
        x = x + attention(p, layer_norm(p["norm1"], x), heads, causal)
        x = x + feed_forward(p, layer_norm(p["norm2"], x), lambda h: jax.nn.gelu(h, approximate=False))
    logits = linear(params["head"], layer_norm(params["final_norm"], x))  # (B, T, V)
    return optax.softmax_cross_entropy_with_integer_labels(logits, next_tokens).mean()


def classifier_batch(a):
    """bench's fixed batch: row b has T tokens (row 0 and every row with --unpadded) or T/4 + (31·b mod
    (T - T/4 + 1)); token t of row b is 3 + ((17·b + 5·t) mod (vocab - 3)), pads 0; target b is 7·b mod classes."""
    B, T, min_len = a.batch, a.seq, a.seq // 4
    b, t = np.arange(B)[:, None], np.arange(T)[None, :]
    lengths = np.where((b == 0) | a.unpadded, T, min_len + (31 * b) % (T - min_len + 1))
    keep = t < lengths
    ids = np.where(keep, 3 + (17 * b + 5 * t) % (a.vocab - 3), 0)
    return jnp.asarray(ids, jnp.int32), jnp.asarray(keep), jnp.asarray((7 * np.arange(B)) % a.classes, jnp.int32)


def bench_text(vocab, T):
    """language_model_bench's text: token i is (5·i + i/7) mod vocab, max(2^16, 2(T + 1)) tokens."""
    i = np.arange(max(1 << 16, 2 * (T + 1)), dtype=np.int64)
    return jnp.asarray((5 * i + i // 7) % vocab, jnp.int32)


def make_step(a, optimizer):
    """One training step, (params, opt_state, key) -> (params, opt_state, key, loss), for jax.jit."""
    if a.model == "lm":
        text, offsets = bench_text(a.vocab, a.seq), jnp.arange(a.seq + 1)

        def loss_of(params, draw):
            # B windows of T + 1 tokens at uniform starts in [0, n - T - 1], as tapegrad's bench draws them
            starts = jax.random.randint(draw, (a.batch, 1), 0, text.shape[0] - a.seq)
            return language_model_loss(params, text[starts + offsets], a.heads)
    else:
        ids, keep, targets = classifier_batch(a)

        def loss_of(params, draw):
            del draw  # the classifier's batch is fixed
            return classifier_loss(params, ids, keep, targets, a.heads)

    def step(params, opt_state, key):
        key, draw = jax.random.split(key)
        loss, grads = jax.value_and_grad(loss_of)(params, draw)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, key, loss

    return step


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # bench/train_step_torch.py's flags (tapegrad train's names, and its older aliases)
    for names, dest, default in [(["d-model"], "d_model", 32), (["heads"], "heads", 2), (["ff", "d-ff"], "d_ff", 64),
                                 (["layers"], "layers", 2), (["context-length", "seq"], "seq", 32),
                                 (["batch-size", "batch"], "batch", 64), (["vocab"], "vocab", 11),
                                 (["classes"], "classes", 8), (["warmup"], "warmup", 20), (["steps"], "steps", 300),
                                 (["repeats"], "repeats", 5), (["threads"], "threads", 1)]:
        p.add_argument(*("--" + name for name in names), dest=dest, type=int, default=default)
    p.add_argument("--model", choices=["classifier", "lm"], default="classifier",
                   help="the classifier on a fixed batch, or the language model on random windows (--vocab: its V)")
    p.add_argument("--unpadded", action="store_true",
                   help="the classifier's rows all T tokens, no pads (the default: rows of T/4..T tokens)")
    a = p.parse_args()
    if a.steps % a.repeats:
        p.error("--steps must be a multiple of --repeats")
    if a.d_model % a.heads:
        p.error(f"--d-model {a.d_model} is not divisible by --heads {a.heads}")
    return a


def main():
    a = parse_args()
    start_rss = rss_mib()
    optimizer = optax.adamw(learning_rate=5e-3, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01)
    classes = a.vocab if a.model == "lm" else a.classes
    params = init_params(jax.random.PRNGKey(0), a, classes, head_bias=a.model == "classifier",
                         final_norm=a.model == "lm")
    opt_state = optimizer.init(params)
    key = jax.random.PRNGKey(1)  # the lm's windows
    n_params = sum(leaf.size for leaf in jax.tree_util.tree_leaves(params))

    # Compiled ahead of the first call, so that the compile is timed alone; params and opt_state are
    # donated: the update writes into their buffers, as tapegrad's and PyTorch's optimizers do.
    t0 = time.perf_counter()
    step = jax.jit(make_step(a, optimizer), donate_argnums=(0, 1)).lower(params, opt_state, key).compile()
    compile_seconds = time.perf_counter() - t0

    first_loss = None  # against tapegrad's (`tapegrad bench --warmup 0 --steps 1`) and PyTorch's
    for _ in range(a.warmup):
        params, opt_state, key, loss = step(params, opt_state, key)
        first_loss = float(loss) if first_loss is None else first_loss
    chunk = a.steps // a.repeats
    rates, cpu_rates, total = [], [], 0.0
    for _ in range(a.repeats):
        cpu0, t0 = time.process_time(), time.perf_counter()
        for _ in range(chunk):
            params, opt_state, key, loss = step(params, opt_state, key)
            loss_value = float(loss)  # waits for the step, as tapegrad's loss.item()
            first_loss = loss_value if first_loss is None else first_loss
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        total += seconds
        rates.append(chunk / seconds)
        cpu_rates.append(chunk / cpu)
    rates.sort()
    cpu_rates.sort()
    median, cpu_median = rates[len(rates) // 2], cpu_rates[len(cpu_rates) // 2]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB
    B, T = a.batch, a.seq

    rows = "" if a.model == "lm" else (" unpadded" if a.unpadded else " padded")
    print(f"jax       jit {a.model}{rows} d_model {a.d_model} heads {a.heads} d_ff {a.d_ff} layers {a.layers} T {T} "
          f"batch {B} params {n_params}: {a.steps} steps in {total:.3f} s, median {median:.1f} steps/s "
          f"(chunks {rates[0]:.1f}..{rates[-1]:.1f}), per CPU second {cpu_median:.1f}, first loss {first_loss:.4f}, "
          f"final loss {loss_value:.4f}  [jax {jax.__version__}, {a.threads} thread{'s' if a.threads > 1 else ''}]")
    print(f"jax       compile: {compile_seconds:.1f} s (jit's lower and compile, before the first step)")
    print(f"jax       peak RSS {peak:.1f} MiB ({peak - start_rss:.1f} MiB above start-up, after import jax)")
    print(f"RESULT steps_per_s={median:.3f} tokens_per_s={median * B * T:.1f} steps_per_cpu_s={cpu_median:.3f} "
          f"peak_rss_mib={peak:.1f} rss_growth_mib={peak - start_rss:.1f} first_loss={first_loss:.6f} "
          f"final_loss={loss_value:.6f} compile_s={compile_seconds:.3f}")


if __name__ == "__main__":
    main()
