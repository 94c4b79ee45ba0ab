"""Reading and writing safetensors files as the format's README lays them out, so that cases can plant
tensors of other shapes, dtypes and values: an unsigned 64-bit little-endian header length n, n bytes of
JSON naming each tensor's dtype, shape and data_offsets, then the data."""

import json
import struct


def read_safetensors(path):
    """-> ({name: {"dtype", "shape", "data": bytes}}, metadata or None), in the header's order."""
    with open(path, "rb") as source:
        raw = source.read()
    length = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + length])
    buffer = raw[8 + length:]
    metadata = header.pop("__metadata__", None)
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = {"dtype": entry["dtype"], "shape": entry["shape"], "data": buffer[begin:end]}
    return tensors, metadata


def header_and_buffer(tensors, metadata):
    header, buffer = {}, b""
    for name, tensor in tensors.items():
        header[name] = {"dtype": tensor["dtype"], "shape": tensor["shape"],
                        "data_offsets": [len(buffer), len(buffer) + len(tensor["data"])]}
        buffer += tensor["data"]
    if metadata is not None:
        header["__metadata__"] = metadata
    return header, buffer


def write_raw(path, header_text: bytes, buffer: bytes):
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(header_text)) + header_text + buffer)


def write_safetensors(path, tensors, metadata):
    header, buffer = header_and_buffer(tensors, metadata)
    write_raw(path, json.dumps(header).encode(), buffer)
