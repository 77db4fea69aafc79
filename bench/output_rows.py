#!/usr/bin/env python3
"""Compares two runs' outputs (v4a-run-package --outputs) row by row.

    python3 bench/output_rows.py A.safetensors B.safetensors [--near REL]

For each output y.step{k}.layer{l} [B, S, dim] (f32) prints the token rows
that are bitwise equal, those that differ by at most REL of the row's
largest magnitude (default 1e-4: the same rows attended in another order),
and those that differ more (another set of rows attended: an indexer pick
that differs; rows not finite in either run count here too). Exits 1 when
a row is not finite in one run only, or when a tensor's shape differs.
Uses PyTorch where it is installed, else Python.
"""
import json
import struct
import sys


def read_tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            continue
        begin, end = info["data_offsets"]
        out[name] = (info["shape"], memoryview(data)[8 + size + begin:8 + size + end])
    return out


def rows_of(shape, view):
    width = shape[-1] if shape else 1
    try:
        import torch

        t = torch.frombuffer(bytearray(view), dtype=torch.float32)
        return t.reshape(-1, width)
    except ImportError:
        import array

        a = array.array("f")
        a.frombytes(view.tobytes())
        return [a[i:i + width] for i in range(0, len(a), width)]


def classify(a_rows, b_rows, near):
    """(equal, near, far, finiteness mismatches) over the rows."""
    try:
        import torch

        if isinstance(a_rows, torch.Tensor):
            same = (a_rows.view(torch.int32) == b_rows.view(torch.int32)).all(1)
            fa, fb = torch.isfinite(a_rows).all(1), torch.isfinite(b_rows).all(1)
            scale = torch.maximum(a_rows.abs().amax(1), b_rows.abs().amax(1))
            diff = (a_rows - b_rows).abs().amax(1)
            close = (diff <= near * scale) & ~same & fa & fb
            far = ~same & ~close & (fa == fb)
            return (int(same.sum()), int(close.sum()), int(far.sum()),
                    int((fa != fb).sum()))
    except ImportError:
        pass
    counts = [0, 0, 0, 0]
    for a, b in zip(a_rows, b_rows):
        if a.tobytes() == b.tobytes():
            counts[0] += 1
            continue
        fa = all(x == x and abs(x) != float("inf") for x in a)
        fb = all(x == x and abs(x) != float("inf") for x in b)
        if fa != fb:
            counts[3] += 1
            continue
        scale = max(max(abs(x) for x in a), max(abs(x) for x in b))
        diff = max(abs(x - y) for x, y in zip(a, b))
        counts[1 if diff <= near * scale else 2] += 1
    return tuple(counts)


def main():
    args = sys.argv[1:]
    near = 1e-4
    if "--near" in args:
        i = args.index("--near")
        near = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    a, b = read_tensors(args[0]), read_tensors(args[1])
    status = 0
    totals = [0, 0, 0, 0]
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b or a[name][0] != b[name][0]:
            print(f"{name}: only in one run, or shapes differ")
            status = 1
            continue
        counts = classify(rows_of(*a[name]), rows_of(*b[name]), near)
        totals = [t + c for t, c in zip(totals, counts)]
        print(f"{name}: {sum(counts)} rows: {counts[0]} equal, {counts[1]} "
              f"within {near:g}, {counts[2]} beyond, {counts[3]} finite in "
              f"one run only")
        status |= counts[3] > 0
    print(f"all: {sum(totals)} rows: {totals[0]} equal, {totals[1]} within "
          f"{near:g}, {totals[2]} beyond, {totals[3]} finite in one run only")
    sys.exit(status)


if __name__ == "__main__":
    main()
