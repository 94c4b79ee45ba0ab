#!/usr/bin/python3
"""Load a tapegrad run directory into PyTorch and classify texts with it.

    scripts/load_in_pytorch.py RUN_DIR "text" ...        label and class probabilities per text
    scripts/load_in_pytorch.py RUN_DIR --compare [--tapegrad build/tapegrad] "text" ...
                                                         also run `tapegrad predict --json` on the same texts;
                                                         exit 1 unless every probability agrees within --tol

RUN_DIR is a run directory (read from the folder its `latest` link points at), its best/, or any checkpoint
folder: config.json, vocab.txt, labels.txt and model.safetensors. With no texts, one text per non-empty line
of stdin (as `tapegrad predict`); put -- before texts that begin with -.
Needs only torch (Debian: python3-torch, which /usr/bin/python3 sees); the safetensors file is read here.
The definitions between the "snippet" markers are those of docs/checkpoints.md (the ctest checks it).
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import warnings

# PyTorch 1.13 warns on every eval-mode TransformerEncoder call with a padding mask (its "fast path" packs the
# batch into a prototype nested tensor); the results are unaffected.
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")

if importlib.util.find_spec("torch") is None:
    sys.exit(f"load_in_pytorch.py needs PyTorch, which {sys.executable} does not have: apt install python3-torch "
             "and run /usr/bin/python3, or use a python that has torch")

# --- snippet: docs/checkpoints.md, "Load a tapegrad checkpoint into PyTorch" (the ctest checks they match) ---
import json, re, struct, torch
from torch import nn

def read_safetensors(path):  # u64 header length, JSON header, raw little-endian data (model.safetensors: all F32)
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return {name: torch.frombuffer(bytearray(raw[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]]),
                                   dtype={"F32": torch.float32}[t["dtype"]]).reshape(t["shape"])
            for name, t in json.loads(raw[8:8 + n]).items() if name != "__metadata__"}

class Classifier(nn.Module):  # the module whose state model.safetensors holds
    def __init__(self, c):
        super().__init__()
        d, L = c["d_model"], c["context_length"]
        # the norm's eps: under "settings" since the components declare their settings; older files: a key
        eps = c["settings"]["norm"]["eps"] if "settings" in c else c.get("layer_norm_eps", 1e-5)
        self.c = c
        self.embed = nn.Embedding(c["vocab_size"], d, padding_idx=None if c["pad_id"] < 0 else c["pad_id"])
        if c["positional"] == "learned":
            self.pos_embed = nn.Embedding(L, d)
        else:  # PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...): a buffer, not in the state
            angle = torch.arange(L)[:, None] / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
            pe = torch.stack([angle.sin(), angle.cos()], -1).flatten(1)[:, :d]
            self.register_buffer("pe", pe.float(), persistent=False)
        layer = nn.TransformerEncoderLayer(d, c["n_heads"], c["d_ff"], c["dropout"], c["activation"], eps,
                                           batch_first=True, norm_first=c["norm_first"])
        self.encoder = nn.TransformerEncoder(layer, c["n_layers"], nn.LayerNorm(d, eps) if c["final_norm"] else None)
        self.head = nn.Linear(d, c["num_classes"])

    def forward(self, ids, pad):  # ids (B, T) int64; pad (B, T) bool, True past a text's end -> logits (B, K)
        pos = self.pos_embed.weight if self.c["positional"] == "learned" else self.pe
        x = self.encoder(self.embed(ids) + pos[:ids.shape[1]], src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1)
        pooled = x[:, 0] if self.c["pool"] == "cls" else x.masked_fill(~keep, 0).sum(1) / keep.sum(1).clamp(min=1)
        return self.head(pooled)
# --- end of snippet ---


def lines(path):  # vocab.txt: line k is id k - 1; labels.txt: line k is class k - 1
    return open(path, encoding="utf-8").read().rstrip("\n").split("\n")


def load(run_dir):
    """(model in eval mode, vocab {token: id}, labels, config) of a checkpoint folder."""
    c = json.load(open(f"{run_dir}/config.json"))
    vocab = {token: i for i, token in enumerate(lines(f"{run_dir}/vocab.txt"))}
    model = Classifier(c).eval()
    model.load_state_dict(read_safetensors(f"{run_dir}/model.safetensors"), strict=True)
    return model, vocab, lines(f"{run_dir}/labels.txt"), c


def encode(text, vocab, c):
    """Ids as `tapegrad predict` makes them: words = runs of non-ASCII-whitespace, unknown -> <unk> (1), an
    empty text -> [<unk>], <cls> (2) first with cls pooling, then the first context_length ids."""
    ids = [vocab.get(w, 1) for w in re.findall(r"[^ \t\n\v\f\r]+", text)] or [1]
    return ([2] + ids if c["pool"] == "cls" else ids)[:c["context_length"]]


def classify(texts, model, vocab, c):
    """Class probabilities (len(texts), K) from one batch padded with <pad> (0) after each sequence."""
    seqs = [encode(t, vocab, c) for t in texts]
    T = max(map(len, seqs))
    ids = torch.tensor([s + [0] * (T - len(s)) for s in seqs])
    pad = torch.tensor([[t >= len(s) for t in range(T)] for s in seqs])
    with torch.no_grad():
        return model(ids, pad).softmax(-1)


def tapegrad_predict(tapegrad, run_dir, texts):
    """Probabilities from `tapegrad predict --json`, one {label: p} per text, in order."""
    # --text=T keeps a text that begins with - from reading as a flag; CLI11 reads "--text=" as --text without
    # its value (it would take the next argument), so an empty text goes as "--text", "".
    cmd = [tapegrad, "predict", "--checkpoint", run_dir, "--json"]
    for t in texts:
        cmd += [f"--text={t}"] if t else ["--text", ""]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"{tapegrad} predict failed: {getattr(e, 'stderr', None) or e}".rstrip())
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    if [r["text"] for r in rows] != list(texts):
        raise RuntimeError(f"tapegrad predict returned {len(rows)} rows for {len(texts)} texts, or other texts")
    return [r["probs"] for r in rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="run directory (or a checkpoint folder such as RUN_DIR/best)")
    parser.add_argument("texts", nargs="*", help="texts to classify (default: one per line of stdin); put -- before "
                        "texts that begin with -")
    parser.add_argument("--compare", action="store_true", help="check against `tapegrad predict --json`")
    parser.add_argument("--tapegrad", default="build/tapegrad", help="the tapegrad binary for --compare")
    parser.add_argument("--tol", type=float, default=1e-5, help="largest |p_torch - p_tapegrad| allowed")
    args = parser.parse_intermixed_args()
    texts = args.texts or [line for line in sys.stdin.read().split("\n") if line]  # as predict: non-empty lines
    if not texts:
        parser.error("no texts (give them as arguments or one per line on stdin)")

    run_dir = args.run_dir
    if os.path.islink(os.path.join(run_dir, "latest")):  # a run directory: every file from one checkpoint,
        run_dir = os.path.realpath(os.path.join(run_dir, "latest"))  # even while training publishes the next
    model, vocab, labels, c = load(run_dir)
    probs = classify(texts, model, vocab, c)
    expected = tapegrad_predict(args.tapegrad, run_dir, texts) if args.compare else None
    worst = 0.0
    for i, text in enumerate(texts):
        p = probs[i].tolist()
        line = f"{labels[max(range(len(p)), key=p.__getitem__)]}\t" + " ".join(
            f"{label}={q:.4f}" for label, q in zip(labels, p)) + f"\t{text}"
        if expected is not None:
            diff = max(abs(q - expected[i][label]) for label, q in zip(labels, p))
            worst = max(worst, diff)
            line += f"\tmax |dp| {diff:.2e}"
        print(line)
    if expected is None:
        return 0
    variant = (f"pool={c['pool']} positional={c['positional']} norm_first={c['norm_first']} "
               f"final_norm={c['final_norm']} activation={c['activation']}")
    verdict = "agree" if worst <= args.tol else "DISAGREE"
    print(f"{args.run_dir}: {variant}: torch and tapegrad {verdict}, max |dp| = {worst:.3e} "
          f"over {len(texts)} texts (tolerance {args.tol:g})")
    return 0 if worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
