#!/usr/bin/python3
"""Load a checkpoint trained with --norm rmsnorm into PyTorch and check it predicts what my-tapegrad does.

    load_in_pytorch.py RUN_DIR MY_TAPEGRAD "text" ...

The model is scripts/load_in_pytorch.py's (docs/checkpoints.md) with its LayerNorms swapped for RMSNorm, as
docs/extending.md shows; PyTorch 2.4 and later has nn.RMSNorm, and the class below is the same layer for
older ones (Debian 12 ships 1.13). Exits 77 when this python has no torch; 1 when the probabilities differ
by more than 1e-5.
"""
import importlib.util
import os
import sys

if importlib.util.find_spec("torch") is None:
    print(f"load_in_pytorch.py: skipped, {sys.executable} has no torch", file=sys.stderr)
    sys.exit(77)

import torch
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("tapegrad_loader", os.path.join(here, "../../scripts/load_in_pytorch.py"))
loader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(loader)


class RMSNorm(nn.Module):  # nn.RMSNorm(d, eps) of PyTorch >= 2.4: one parameter, "weight"
    def __init__(self, d, eps):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def load_rmsnorm(run_dir):
    c = loader.json.load(open(f"{run_dir}/config.json"))
    assert c["norm"] == "rmsnorm", f"{run_dir} was trained with norm {c['norm']}"
    d = c["d_model"]
    # rmsnorm's own setting eps, under the component (older checkpoints: the top-level layer_norm_eps)
    eps = c["settings"]["norm"]["eps"] if "settings" in c else c.get("layer_norm_eps", 1e-5)
    model = loader.Classifier(c)
    # PyTorch 1.13's eval-mode fast paths run nn.LayerNorm's arithmetic on norm1/norm2's weight and bias
    # whatever those modules are; these two switches keep it on the modules' own forward.
    model.encoder.enable_nested_tensor = False
    for layer in model.encoder.layers:
        layer.activation_relu_or_gelu = False
        layer.norm1, layer.norm2 = RMSNorm(d, eps), RMSNorm(d, eps)
    if c["final_norm"]:
        model.encoder.norm = RMSNorm(d, eps)
    model.load_state_dict(loader.read_safetensors(f"{run_dir}/model.safetensors"), strict=True)
    vocab = {token: i for i, token in enumerate(loader.lines(f"{run_dir}/vocab.txt"))}
    return model.eval(), vocab, loader.lines(f"{run_dir}/labels.txt"), c


def main():
    run_dir, program, texts = sys.argv[1], sys.argv[2], sys.argv[3:]
    if os.path.islink(os.path.join(run_dir, "latest")):
        run_dir = os.path.realpath(os.path.join(run_dir, "latest"))
    model, vocab, labels, c = load_rmsnorm(run_dir)
    probs = loader.classify(texts, model, vocab, c)
    expected = loader.tapegrad_predict(program, run_dir, texts)
    worst = max(abs(probs[i][k].item() - expected[i][label]) for i in range(len(texts)) for k, label in enumerate(labels))
    verdict = "agree" if worst <= 1e-5 else "DISAGREE"
    print(f"PyTorch {torch.__version__} and my-tapegrad {verdict} on an rmsnorm checkpoint: max |dp| = {worst:.3e} "
          f"over {len(texts)} texts")
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
