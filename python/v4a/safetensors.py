"""The runners' tensor files (.safetensors) with NumPy: what v4a-run and
v4a-run-package take (--inputs: x.step{k}, lengths.step{k}) and write
(--outputs: y.step{k}.layer{l}). F32 and I32 tensors."""
import json

import numpy as np

_DTYPES = {"float32": "F32", "int32": "I32"}
_ARRAYS = {"F32": np.float32, "I32": np.int32}


def write(path, tensors):
    """Writes a dict of name -> NumPy array (float32 or int32)."""
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": _DTYPES[array.dtype.name],
                        "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def read(path, only=None):
    """A dict of name -> NumPy array (F32 and I32 tensors); with `only`, a
    predicate on names, just the tensors it accepts."""
    with open(path, "rb") as f:
        data = f.read()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    header.pop("__metadata__", None)
    if only is not None:
        header = {name: t for name, t in header.items() if only(name)}
    return {name: np.frombuffer(body[t["data_offsets"][0]:
                                     t["data_offsets"][1]],
                                _ARRAYS[t["dtype"]]).reshape(t["shape"])
            for name, t in header.items()}
