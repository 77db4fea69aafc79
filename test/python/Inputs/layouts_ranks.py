"""layouts_ranks.py CONFIG: the compile options past the first header's.

MXFP4 index keys hold the model's fp4-rounded keys exactly, so a model
compiled with them gives the bf16-key model's outputs bit for bit. Tensor
parallelism: ranks 0 and 1 of 2 each hold half the heads and output groups
of the same random weights; their partial outputs, summed in rank order in
f32 and rounded to bf16 once, are the unsharded outputs within 2 bf16 ulps
of each output's largest value.
"""
import sys

import numpy as np

import v4a

# 40 tokens give a ratio-4 layer 10 compressed rows for a top-k of 4: the
# index keys decide which rows are picked.
STEPS = [[40, 27], [1, 1], [1, 1]]


def run(config, **options):
    model = v4a.Model.compile(config, max_sequences=2, **options)
    model.load_random_weights(1)
    info = model.info()
    assert (info["tensor_parallel"], info["tensor_rank"]) == (
        options.get("tensor_parallel", 1), options.get("tensor_rank", 0)), info
    sequences = [model.add_sequence() for _ in range(2)]
    dim = model.info()["hidden_size"]
    layers = model.selected_layers()
    rng = np.random.default_rng(7)
    outputs = []
    for lengths in STEPS:
        x = (rng.integers(-256, 257, (sum(lengths), dim)) / 128).astype(
            np.float32)
        outputs.append([np.array(y, np.float32, copy=True) for y in
                        model.step(sequences, lengths, [x] * len(layers))])
    model.close()
    return outputs


def to_bf16(x):
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def ulp(x):
    """A bf16 ulp at |x| (8 significant bits)."""
    return 2.0 ** (np.floor(np.log2(max(abs(x), 2.0 ** -126))) - 7)


config = sys.argv[1]
whole = run(config)
bf16_keys = run(config, index_layout="bf16")
same = all(np.array_equal(a, b) for step_a, step_b in zip(whole, bf16_keys)
           for a, b in zip(step_a, step_b))
print("mxfp4 keys: %s" % ("bitwise equal" if same else "DIFFER"))

ranks = [run(config, tensor_parallel=2, tensor_rank=r) for r in range(2)]
worst = 0.0
for k, step in enumerate(whole):
    for layer, y in enumerate(step):
        total = ranks[0][k][layer].astype(np.float32)
        total = total + ranks[1][k][layer].astype(np.float32)
        error = np.max(np.abs(to_bf16(total) - y)) / ulp(np.max(np.abs(y)))
        worst = max(worst, float(error))
print("tensor parallel 2: worst %.3f ulps" % worst)

# The sum over GPUs takes a GPU model and a 128-byte id.
model = v4a.Model.compile(config, max_sequences=1, tensor_parallel=2)
model.load_random_weights(1)
for bad in (b"short", bytes(128)):
    try:
        model.join_ranks(bad)
        print("join_ranks(%d bytes): no error" % len(bad))
    except v4a.V4AError as error:
        print("join_ranks(%d bytes): %s" % (len(bad), error))
model.close()
print("PASS" if same and worst <= 2 else "FAIL")
