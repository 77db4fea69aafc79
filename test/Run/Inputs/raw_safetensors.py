"""Writes a safetensors file with a hand-written header, for error tests.

usage: raw_safetensors.py OUT overlap|metadata
overlap: two F32 tensors whose data_offsets share bytes;
metadata: a valid tensor with a __metadata__ that is a list.
"""
import json
import struct
import sys

out, kind = sys.argv[1], sys.argv[2]
if kind == "overlap":
    header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}
    data = bytes(12)
else:
    header = {"__metadata__": ["not", "an", "object"],
              "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    data = bytes(4)
text = json.dumps(header).encode()
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
