"""decode.py PACKAGE LAYER BATCH PROMPT STEPS DIR: decode.c in Python, from
PyTorch CUDA tensors on a non-default stream; writes DIR/y{k}.py.bf16."""
import os
import sys

import torch

import v4a

package, layer, batch, prompt, steps, folder = sys.argv[1:7]
layer, batch, prompt, steps = int(layer), int(batch), int(prompt), int(steps)
model = v4a.Model.open_package(package, max_sequences=batch, layers=[layer])
model.load_random_weights(1)
dim = model.hidden_size
sequences = [model.add_sequence() for _ in range(batch)]
stream = torch.cuda.Stream()
with torch.cuda.stream(stream):
    for k in range(steps + 1):
        lengths = [1 if k else prompt] * batch
        with open(os.path.join(folder, "x%d.bf16" % k), "rb") as f:
            bits = torch.frombuffer(bytearray(f.read()), dtype=torch.bfloat16)
        x = bits.view(-1, dim).to("cuda", non_blocking=True)
        (y,) = model.step(sequences, lengths, [x])  # on `stream`
        with open(os.path.join(folder, "y%d.py.bf16" % k), "wb") as f:
            f.write(y.cpu().view(torch.int16).numpy().tobytes())
print("decode.py: %d steps of %d sequences" % (steps + 1, batch))
