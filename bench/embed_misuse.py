"""embed_misuse.py PACKAGE LAYER: the Python package's misuse errors with
PyTorch CUDA tensors on the GPU (each must raise V4AError naming it)."""
import sys

import torch

import v4a

model = v4a.Model.open_package(sys.argv[1], max_sequences=2,
                               layers=[int(sys.argv[2])])
model.load_random_weights(1)
dim = model.hidden_size
seqs = [model.add_sequence(), model.add_sequence()]
good = torch.zeros(4, dim, device="cuda", dtype=torch.bfloat16)
cases = {
    "host memory": [good.cpu()],
    "f32 on the GPU": [good.float()],
    "not contiguous": [torch.zeros(4, 2 * dim, device="cuda",
                                   dtype=torch.bfloat16)[:, ::2]],
    "a wrong shape": [torch.zeros(5, dim, device="cuda", dtype=torch.bfloat16)],
}
failed = 0
for what, inputs in cases.items():
    try:
        model.step(seqs, [2, 2], inputs)
        print("FAIL: %s was accepted" % what)
        failed += 1
    except v4a.V4AError as error:
        print("ok: %s: %s" % (what, error))
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    x = torch.randn(4, dim, device="cuda").to(torch.bfloat16)
    (y,) = model.step(seqs, [2, 2], [x])
side.synchronize()
print("ok: a step on a side stream: finite %s" % bool(torch.isfinite(y).all()))
model.synchronize()
sys.exit(1 if failed else 0)
