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
# A stream of another CUDA context than the model's (the device's primary
# one) is refused, not used.
import ctypes
cuda = ctypes.CDLL("libcuda.so.1")
context, other = ctypes.c_void_p(), ctypes.c_void_p()
current = ctypes.c_void_p()
cuda.cuCtxGetCurrent(ctypes.byref(current))
if cuda.cuCtxCreate_v2(ctypes.byref(context), 0, 0) == 0 and \
        cuda.cuStreamCreate(ctypes.byref(other), 1) == 0:
    cuda.cuCtxSetCurrent(current)
    # The C ABI's own check (PyTorch would refuse to order a foreign stream
    # before v4a sees it).
    out = torch.empty_like(good)
    tensors = [(v4a._Tensor * 1)(v4a._Tensor(t.data_ptr(), 1, 1, 0, 4, dim))
               for t in (good, out)]
    ids, lengths = (ctypes.c_int64 * 2)(*seqs), (ctypes.c_int64 * 2)(2, 2)
    status = v4a._lib().v4a_step(model._handle, 2, ids, lengths, tensors[0],
                                 tensors[1], 1, other.value)
    message = v4a._lib().v4a_last_error().decode()
    if status == 1 and "another CUDA context" in message:
        print("ok: a stream of another context: %s" % message)
    else:
        print("FAIL: a stream of another context: status %d, %s" %
              (status, message))
        failed += 1
    # An input in memory of the second context, and one in an allocation
    # shorter than the input's bytes: the pointer checks refuse both.
    def refused(pointer, needle, what):
        global failed
        given = (v4a._Tensor * 1)(v4a._Tensor(pointer, 1, 1, 0, 4, dim))
        status = v4a._lib().v4a_step(model._handle, 2, ids, lengths, given,
                                     tensors[1], 1, None)
        message = v4a._lib().v4a_last_error().decode()
        if status == 1 and needle in message:
            print("ok: %s: %s" % (what, message))
        else:
            print("FAIL: %s: status %d, %s" % (what, status, message))
            failed += 1
    foreign, short = ctypes.c_uint64(), ctypes.c_uint64()
    cuda.cuCtxSetCurrent(context)
    cuda.cuMemAlloc_v2(ctypes.byref(foreign), ctypes.c_size_t(4 * dim * 2))
    cuda.cuCtxSetCurrent(current)
    cuda.cuMemAlloc_v2(ctypes.byref(short), ctypes.c_size_t(1024))
    refused(foreign.value, "another GPU or CUDA context",
            "memory of another context")
    refused(short.value, "allocation ends", "a short allocation")
    cuda.cuMemFree_v2(ctypes.c_uint64(short.value))
    cuda.cuStreamDestroy_v2(other)
    cuda.cuCtxDestroy_v2(context)
else:
    print("FAIL: cannot make a second CUDA context")
    failed += 1
# Two layers' outputs in one buffer: one kernel writes them in no set
# order, so the step refuses them.
other_layer = 0 if int(sys.argv[2]) != 0 else 2
pair = v4a.Model.open_package(sys.argv[1], max_sequences=2,
                              layers=sorted([int(sys.argv[2]), other_layer]))
pair.load_random_weights(1)
pair_seqs = [pair.add_sequence(), pair.add_sequence()]
shared = torch.empty_like(good)
try:
    pair.step(pair_seqs, [2, 2], [good, good], [shared, shared])
    print("FAIL: overlapping outputs were accepted")
    failed += 1
except v4a.V4AError as error:
    ok = "overlaps" in str(error)
    print("%s: overlapping outputs: %s" % ("ok" if ok else "FAIL", error))
    failed += 0 if ok else 1
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    x = torch.randn(4, dim, device="cuda").to(torch.bfloat16)
    (y,) = model.step(seqs, [2, 2], [x])
side.synchronize()
print("ok: a step on a side stream: finite %s" % bool(torch.isfinite(y).all()))
model.synchronize()
sys.exit(1 if failed else 0)
