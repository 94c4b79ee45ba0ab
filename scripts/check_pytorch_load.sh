#!/bin/sh
# The optional ctest "pytorch: a checkpoint loads into PyTorch and predicts the same probabilities".
#   scripts/check_pytorch_load.sh TAPEGRAD_BINARY REPO_DIR
# Trains two tiny checkpoints into a temporary folder and runs scripts/load_in_pytorch.py --compare on
# each: PyTorch must load the weights with strict=True and give every probability of `tapegrad predict`
# within 1e-5. Between them the two runs cover both pool modes, both positional kinds, post-LN and pre-LN,
# with and without the final norm, ReLU and GELU. A language model, untied and tied, must give `tapegrad eval`s
# loss through the LanguageModel of docs/checkpoints.md (strict=True) within 1e-4. Then checks that the snippet of docs/checkpoints.md has the
# script's definitions and, run as printed, gives the same probabilities. Exits 77 (ctest: skipped) when
# /usr/bin/python3 has no torch (Debian: apt install python3-torch).
set -eu
if [ $# -ne 2 ]; then
  echo "usage: $0 TAPEGRAD_BINARY REPO_DIR" >&2
  exit 2
fi
tapegrad=$1
repo=$2
python=/usr/bin/python3
if ! "$python" -c "import torch" >/dev/null 2>&1; then
  echo "skipped: $python cannot import torch (Debian: apt install python3-torch)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name, then the train flags of one variant
train() {
  name=$1
  shift
  if ! "$tapegrad" train --steps 30 --eval-every 30 --batch-size 32 --out "$tmp/$name" "$@" >"$tmp/$name.log" 2>&1; then
    cat "$tmp/$name.log"
    echo "FAILED: tapegrad train $*" >&2
    exit 1
  fi
}
# The defaults: mean pooling, learned positions, post-LN, ReLU, no final norm.
train post-mean-learned --task majority
# Every other choice: <cls> pooling, sinusoids, pre-LN with a final norm, GELU.
train pre-cls-sinusoidal --task order --pool cls --positional sinusoidal --norm-first --final-norm --activation gelu

# One padded batch on the PyTorch side (lengths 0 to 40, so truncation to the context length too), one text
# at a time in tapegrad; unknown words, a leading dash and tabs. (An empty text is refused by `tapegrad
# predict`, tests/train/test_outputs.cpp, so it is not compared here.)
long=""
i=0
while [ $i -lt 40 ]; do
  long="$long t$((i % 8))"
  i=$((i + 1))
done
status=0
for name in post-mean-learned pre-cls-sinusoidal; do
  "$python" "$repo/scripts/load_in_pytorch.py" --compare --tapegrad "$tapegrad" "$tmp/$name" -- \
    "t3 t1 t3 t0 t5 t3" "t1" "t1 A t4 t2 B t0" "t0 B t5 A t6 t6" "never seen t4 t4" "$long" \
    "	t5 t5  t6 " "-t2 t2" || status=1
done

# The snippet of docs/checkpoints.md: its definitions are the script's, and run as printed (on each
# checkpoint instead of runs/demo) it gives the probabilities of `tapegrad predict`.
"$python" - "$repo" "$tapegrad" "$tmp/post-mean-learned" "$tmp/pre-cls-sinusoidal" <<'PYTHON' || status=1
import contextlib, io, json, re, subprocess, sys, warnings
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
repo, tapegrad, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
code = re.search(r"```python\n(.*?)```", open(f"{repo}/docs/checkpoints.md", encoding="utf-8").read(), re.S).group(1)
definitions, usage = code.split('run, text = "runs/demo", "t3 t1 t3 t0 t5 t3"\n')
if definitions.rstrip() + "\n" not in open(f"{repo}/scripts/load_in_pytorch.py", encoding="utf-8").read():
    sys.exit("docs/checkpoints.md: the snippet's definitions differ from those of scripts/load_in_pytorch.py")
worst = 0.0
for run in runs:
    scope = {"run": run, "text": "t3 t1 t4 t0 B t3 A"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(definitions + usage, scope)
    out = subprocess.run([tapegrad, "predict", "--checkpoint", run, "--json", "--text=" + scope["text"]],
                         check=True, capture_output=True, text=True).stdout
    expected = json.loads(out)["probs"]
    worst = max(worst, max(abs(p - expected[l]) for l, p in zip(scope["labels"], scope["probs"].tolist())))
print(f"docs/checkpoints.md snippet: max |dp| = {worst:.3e} against tapegrad predict on {len(runs)} checkpoints")
sys.exit(worst > 1e-5)
PYTHON

# A language model (docs/checkpoints.md, "A language model, tied or not"), untied and tied: the snippet's
# LanguageModel, run as printed on each run directory, loads the weights with strict=True, and its mean
# next-token loss over a text's consecutive windows is the one `tapegrad eval` reports.
i=0
lm_text=""
while [ $i -lt 60 ]; do
  lm_text="${lm_text}the fox $i jumps over the lazy dog; café au lait.
"
  i=$((i + 1))
done
printf '%s' "$lm_text" > "$tmp/corpus.txt"
for tie in "" --tie-embeddings; do
  name=lm$tie
  train "$name" --task lm --data "$tmp/corpus.txt" --context-length 24 --d-model 16 --heads 2 --ff 32 --norm-first \
    --activation gelu $tie
  "$tapegrad" eval --checkpoint "$tmp/$name" --data "$tmp/corpus.txt" --json > "$tmp/$name.eval" || status=1
done
"$python" - "$repo" "$tmp/corpus.txt" "$tmp/lm" "$tmp/lm--tie-embeddings" <<'PYTHON' || status=1
import json, re, sys, warnings
import torch
warnings.filterwarnings("ignore", message="enable_nested_tensor")
repo, corpus, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
blocks = re.findall(r"```python\n(.*?)```", open(f"{repo}/docs/checkpoints.md", encoding="utf-8").read(), re.S)
reader = re.search(r"(def read_safetensors.*?)\n\n", blocks[0], re.S).group(1)
snippet = next(b for b in blocks if "class LanguageModel" in b)
worst = 0.0
for run in runs:
    scope = {"run": run}
    exec("import json, struct, numpy, torch\nfrom torch import nn\n" + reader + "\n\n" + snippet, scope)
    model, c = scope["model"], scope["c"]
    tokens = json.load(open(f"{run}/tokenizer.json", encoding="utf-8"))["tokens"]
    ids = [tokens.index(ch) if ch in tokens else 0 for ch in open(corpus, encoding="utf-8").read()]
    T, total, count = c["context_length"], 0.0, 0
    with torch.no_grad():
        for start in range(0, len(ids) - 1, T):  # tapegrad's consecutive windows: T + 1 tokens every T
            window = torch.tensor([ids[start:start + T + 1]])
            logits = model(window[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits[0].double(), window[0, 1:], reduction="sum")
            total, count = total + loss.item(), count + window.shape[1] - 1
    expected = json.load(open(run + ".eval"))["loss"]
    worst = max(worst, abs(total / count - expected))
print(f"docs/checkpoints.md LanguageModel: max |loss - tapegrad eval| = {worst:.3e} on {len(runs)} checkpoints")
sys.exit(worst > 1e-4)
PYTHON
exit $status
