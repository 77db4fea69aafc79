"""embed_overhead.py PACKAGE LAYER BATCH CALLS: the host time of a decode
step's call from Python at BATCH sequences: Model.step (DLPack, ctypes) and
the bare ctypes call of v4a_step with its arguments built once, in the same
process, alternating call by call (so that drift of the machine falls on
both); and Model.step with the C call replaced by a no-op: the Python
layer's own cost where it runs. Medians."""
import ctypes
import sys
import time

import torch

import v4a

package, layer, batch, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
model = v4a.Model.open_package(package, max_sequences=batch, layers=[layer])
model.load_random_weights(1)
dim = model.hidden_size
sequences = [model.add_sequence() for _ in range(batch)]
stream = torch.cuda.Stream()
x = torch.zeros(batch, dim, device="cuda", dtype=torch.bfloat16)
y = torch.empty_like(x)
ones = [1] * batch
lib = v4a._lib()
ins = (v4a._Tensor * 1)(v4a._Tensor(x.data_ptr(), 1, 1, 0, batch, dim))
outs = (v4a._Tensor * 1)(v4a._Tensor(y.data_ptr(), 1, 1, 0, batch, dim))
ids = (ctypes.c_int64 * batch)(*sequences)
lengths = (ctypes.c_int64 * batch)(*ones)


def median(samples):
    return 1e6 * sorted(samples)[len(samples) // 2]


calls_of = {
    "Model.step": lambda: model.step(sequences, ones, [x], [y]),
    "ctypes v4a_step": lambda: lib.v4a_step(model._handle, batch, ids, lengths,
                                            ins, outs, 1, stream.cuda_stream)}
real_step = v4a._step


def python_alone():
    v4a._step = lambda *args: 0
    try:
        model.step(sequences, ones, [x], [y])
    finally:
        v4a._step = real_step


calls_of["Model.step, C call a no-op"] = python_alone
times = {name: [] for name in calls_of}
with torch.cuda.stream(stream):
    for _ in range(calls):
        for name, call in calls_of.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
            stream.synchronize()
for name, samples in times.items():
    print("embed_overhead.py: %s call %.1f us (median of %d)" %
          (name, median(samples), calls))
print("embed_overhead.py: Model.step minus the bare call: %.1f us" %
      (median(times["Model.step"]) - median(times["ctypes v4a_step"])))
