"""Compares two runs' outputs (safetensors of f32 holding bf16 values)
element by element: |a - b| must be at most ULPS bf16 ulps of the tensor's
largest magnitude (the partial sums a tensor-parallel all-reduce adds are of
that size, and each was rounded to bf16 once).

usage: within_ulps.py A B ULPS
Prints the worst distance in those ulps and exits 1 when a tensor exceeds
ULPS or the two files do not hold the same tensors.
"""
import math
import sys

sys.path.insert(0, sys.argv[4] if len(sys.argv) > 4 else ".")
from compare import load  # noqa: E402  (DeepSeek's reader, pure Python)


def ulp(magnitude):
    if magnitude == 0.0:
        return 2.0 ** -133
    return 2.0 ** (math.floor(math.log2(magnitude)) - 7)


a, b, limit = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
if sorted(a) != sorted(b):
    print("the files hold different tensors")
    sys.exit(1)
worst, failing = 0.0, []
for name in sorted(a):
    (shape_a, x), (shape_b, y) = a[name], b[name]
    if shape_a != shape_b:
        failing.append(f"{name}: shapes {shape_a} and {shape_b}")
        continue
    unit = ulp(max(max(abs(v) for v in x), max(abs(v) for v in y)))
    distance = max(abs(u - v) for u, v in zip(x, y)) / unit
    if not math.isfinite(distance) or distance > limit:
        failing.append(f"{name}: {distance:.2f} ulps")
    worst = max(worst, distance)
for line in failing:
    print(line)
print(f"{'ok' if not failing else 'FAIL'}: {len(a)} tensors, worst "
      f"{worst:.3f} ulps of each tensor's largest value")
sys.exit(1 if failing else 0)
