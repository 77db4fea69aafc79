"""A tensor-parallel package's ranks through the Python package on one GPU.

usage: tensor_parallel_check.py WHOLE.v4apkg RANKS.v4apkg [LAYERS]

Opens the unsharded package and every rank of the sharded one (the C ABI's
v4a_options.tensor_rank), loads the same random weights into each (whole;
a rank keeps its part), runs the same varlen steps (a prefill of 40 and 9
tokens, then decode steps) from torch bf16 tensors, sums the ranks' partial
outputs in f32 in rank order and rounds to bf16 once, and compares with the
unsharded outputs: every tensor within 2 bf16 ulps of its largest value.
Prints the worst distance and PASS or FAIL.
"""
import math
import sys

import torch

import v4a

STEPS = [[40, 9], [1, 1], [1, 1]]


def run(path, layers, rank=None):
    options = {} if rank is None else {"tensor_rank": rank}
    model = v4a.Model.open_package(path, max_sequences=2, layers=layers,
                                   **options)
    model.load_random_weights(7)
    sequences = [model.add_sequence() for _ in STEPS[0]]
    dim = model.info()["hidden_size"]
    generator = torch.Generator().manual_seed(5)
    outputs = []
    for lengths in STEPS:
        x = (torch.randint(-256, 257, (sum(lengths), dim),
                           generator=generator) / 128).to(torch.bfloat16)
        x = x.cuda()
        ys = model.step(sequences, lengths, [x] * len(layers))
        torch.cuda.synchronize()
        outputs.append([y.float().cpu() for y in ys])
    model.close()
    return outputs


def ulp(magnitude):
    return 2.0 ** (math.floor(math.log2(max(magnitude, 2.0 ** -126))) - 7)


whole_path, ranks_path = sys.argv[1], sys.argv[2]
layers = [int(n) for n in (sys.argv[3] if len(sys.argv) > 3 else
                           "0,2,3").split(",")]
whole = run(whole_path, layers)
degree = 1
while True:  # the package's degree: the first rank it refuses
    try:
        v4a.Model.open_package(ranks_path, layers=layers,
                               tensor_rank=degree).close()
        degree += 1
    except v4a.V4AError as error:
        print("rank %d: %s" % (degree, error))
        break
ranks = [run(ranks_path, layers, r) for r in range(degree)]
worst = 0.0
for k, step in enumerate(whole):
    for i, want in enumerate(step):
        total = ranks[0][k][i].clone()
        for rank in ranks[1:]:
            total += rank[k][i]
        got = total.to(torch.bfloat16).float()
        scale = ulp(float(want.abs().max()))
        worst = max(worst, float((got - want).abs().max()) / scale)
print("%d ranks through the C ABI: worst %.3f bf16 ulps of each output's "
      "largest value" % (degree, worst))
print("PASS" if worst <= 2 else "FAIL")
