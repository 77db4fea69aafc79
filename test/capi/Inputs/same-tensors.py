"""same-tensors.py A B: whether two safetensors files hold the same tensors,
name for name, with the same dtype, shape and bytes (no NumPy needed)."""
import json
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    header.pop("__metadata__", None)
    return {name: (t["dtype"], t["shape"],
                   body[t["data_offsets"][0]:t["data_offsets"][1]])
            for name, t in header.items()}


a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
if sorted(a) != sorted(b):
    sys.exit("different tensors: %s against %s" % (sorted(a), sorted(b)))
for name in sorted(a):
    if a[name] != b[name]:
        sys.exit("%s differs (%s %s against %s %s)" %
                 (name, a[name][0], a[name][1], b[name][0], b[name][1]))
print("same: %d tensors" % len(a))
