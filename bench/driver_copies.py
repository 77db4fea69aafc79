"""driver_copies.py: host and GPU time of 44 device-to-device copies of a
decode step's layer rows: one cuMemcpyDtoDAsync each, against one
cuMemcpyBatchAsync_v2 (CUDA 13); and that the batch copies right."""
import ctypes, time, torch
cuda = ctypes.CDLL("libcuda.so.1")
n, size = 44, 32 * 4096 * 2
x = torch.randn(n * size // 2, device="cuda", dtype=torch.bfloat16)
y = torch.zeros_like(x)
stream = torch.cuda.Stream()
h = ctypes.c_void_p(stream.cuda_stream)
src = [x.data_ptr() + i * size for i in range(n)]
dst = [y.data_ptr() + i * size for i in range(n)]
copy = cuda.cuMemcpyDtoDAsync_v2
copy.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
batch = getattr(cuda, "cuMemcpyBatchAsync_v2", None)
print("cuMemcpyBatchAsync_v2:", batch is not None)
class Attr(ctypes.Structure):
    _fields_ = [("order", ctypes.c_int), ("sh", ctypes.c_int * 2), ("dh", ctypes.c_int * 2), ("flags", ctypes.c_uint)]
D = ctypes.c_uint64 * n
S = ctypes.c_size_t * n
attr = Attr(1, (0, 0), (0, 0), 0)
idx = ctypes.c_size_t(0)
def singles():
    for i in range(n):
        r = copy(dst[i], src[i], size, h)
        assert r == 0, r
def batched():
    r = batch(D(*dst), D(*src), S(*([size] * n)), ctypes.c_size_t(n), ctypes.byref(attr), ctypes.byref(idx), ctypes.c_size_t(1), h)
    return r
print("batch returns", batched()); torch.cuda.synchronize()
assert torch.equal(x, y), "batch copies wrong"
for name, f in (("singles", singles), ("batch", batched), ("singles", singles), ("batch", batched)):
    times = []
    for _ in range(20):
        torch.cuda.synchronize(); t = time.perf_counter(); f(); times.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
    times.sort(); print(name, "host us median", round(times[10], 1), "min", round(times[0], 1))
# GPU time of each form
for name, f in (("singles", singles), ("batch", batched)):
    a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        a.record(); f(); b.record()
    torch.cuda.synchronize(); print(name, "GPU us (events)", round(a.elapsed_time(b) * 1000, 1))
