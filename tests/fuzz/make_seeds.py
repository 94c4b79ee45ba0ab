#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/: small valid and near-valid inputs.

Usage: make_seeds.py CHECKPOINT_DIR   (a tiny run's checkpoint, made with
  tapegrad train --task majority --symbols 4 --min-len 2 --max-len 4 --steps 2 --eval-every 2 \
                 --d-model 4 --heads 2 --ff 4 --layers 1 --batch-size 4 --out DIR; then DIR/latest)
The checkpoint's own files are copied; the rest are built here from the formats' descriptions, except the
SentencePiece models of corpus/tokenizer/*.model, which make_model_seeds.cpp learns (run it first, as its
comment says): each is a seed as it is (fuzz_tokenizer also reads its input as a model's bytes) and, wrapped
in base64, a bpe tokenizer.json.
"""
import base64
import glob
import json
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
checkpoint = sys.argv[1]


def put(target, name, data):
    folder = os.path.join(here, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def copy(target, name):
    with open(os.path.join(checkpoint, name), "rb") as f:
        put(target, name, f.read())


def safetensors(header, buffer=b""):
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + buffer


for name in ["model.safetensors", "optimizer.safetensors"]:
    copy("safetensors", name)
put("safetensors", "empty_header", safetensors({}))
put("safetensors", "metadata_only", safetensors({"__metadata__": {"format": "pt"}}))
put("safetensors", "every_dtype", safetensors({
    "f": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
    "d": {"dtype": "F64", "shape": [1], "data_offsets": [8, 16]},
    "i": {"dtype": "I64", "shape": [1, 1], "data_offsets": [16, 24]},
    "b": {"dtype": "BOOL", "shape": [3], "data_offsets": [24, 27]},
    "e": {"dtype": "F32", "shape": [0, 5], "data_offsets": [27, 27]},
    "s": {"dtype": "F32", "shape": [], "data_offsets": [27, 31]}},
    struct.pack("<ff", 1.5, -2) + struct.pack("<d", 3.25) + struct.pack("<q", -7) + b"\x01\x00\x01" +
    struct.pack("<f", 9)))
put("safetensors", "near_overlap", safetensors({
    "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
    "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)))
put("safetensors", "near_bad_length", struct.pack("<Q", 1 << 40) + b"{}")

for name in ["config.json", "trainer.json"]:
    copy("config", name)
config = json.load(open(os.path.join(checkpoint, "config.json")))
put("config", "near_float_d_model", json.dumps(dict(config, d_model=4.0)))
put("config", "near_unknown_key", json.dumps(dict(config, d_modle=4)))
put("config", "near_huge_vocab", json.dumps(dict(config, vocab_size=1 << 60)))
put("config", "compact", json.dumps(config, separators=(",", ":")))
# The settings layout with every built-in kind that declares some (the checkpoint above may be older, with
# the settings as top-level keys: both layouts are seeds).
put("config", "settings_moe", json.dumps({
    "activation": "relu", "attention": "softmax", "context_length": 4, "d_ff": 4, "d_model": 4, "dropout": 0.0,
    "ffn": "moe", "final_norm": False, "n_heads": 2, "n_layers": 1, "norm": "layernorm", "norm_first": False,
    "num_classes": 4, "pad_id": 0, "pool": "mean", "positional": "learned",
    "settings": {"attention": {"causal": True, "temperature": 1.0}, "ffn": {"aux_weight": 0.01, "experts": 3, "top_k": 2},
                 "norm": {"eps": 1e-05}},
    "vocab_size": 7}, separators=(",", ":")) + "\n")

put("tsv", "plain", "pos\tgood film\nneg\tbad film\n")
put("tsv", "bom_crlf_blank", "\ufeffpos\tgood film\r\n\r\n  \nneg\tbad\tfilm\r\n")
put("tsv", "no_final_newline", "a\tx y z\nb\tz")
put("tsv", "near_no_tab", "pos\tgood\nneg bad\n")
put("tsv", "utf8", "positif\tun très bon film ☺\nnégatif\t悪い 映画\n")

for name in ["vocab.txt", "labels.txt"]:
    copy("vocab", name)
put("vocab", "bom_crlf", "\ufeff<pad>\r\n<unk>\r\n<cls>\r\nfilm\r\ngood\r\n")
put("vocab", "reserved_only", "<pad>\n<unk>\n<cls>\n")
put("vocab", "text", "the film was good <unk> and <pad> the\tend\n")
put("vocab", "near_duplicate", "<pad>\n<unk>\n<cls>\na\na\n")

put("tokenizer", "characters.json", json.dumps({"kind": "characters", "tokens": ["<unk>", "\n", " ", "a", "é", "☺"]}, ensure_ascii=False))
put("tokenizer", "words.json", json.dumps({"kind": "words", "tokens": ["<unk>", "the", "film", "était", "good."]}, indent=1, ensure_ascii=False))
put("tokenizer", "near_unk_not_first", json.dumps({"kind": "words", "tokens": ["the", "<unk>"]}))
put("tokenizer", "near_two_characters", json.dumps({"kind": "characters", "tokens": ["<unk>", "ab"]}))
for model in sorted(glob.glob(os.path.join(here, "corpus", "tokenizer", "*.model"))):
    with open(model, "rb") as f:
        encoded = base64.b64encode(f.read()).decode()
    name = os.path.basename(model)[:-len(".model")]
    put("tokenizer", name + ".json", json.dumps({"kind": "bpe", "model": encoded}, indent=1) + "\n")
    if name == "bpe":
        put("tokenizer", "near_bad_base64", json.dumps({"kind": "bpe", "model": encoded[:-1] + "!"}))
