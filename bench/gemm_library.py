"""The library alone: every product v4a sends to cuBLASLt, timed through
PyTorch in the same run (torch.matmul / torch.bmm for bf16, bf16 in and
f32 out for the compressors, torch._scaled_mm with 1x128 x 128x128 block
scales for the fp8 form of the fp8 checkpoints' products).

usage: gemm_library.py LIST.txt [--eager] > library.jsonl
LIST.txt: the lines of `v4a-check-gemms PACKAGE... --list`. Each distinct
shape is timed once: 20 calls captured in a CUDA graph, replayed, the median
of 10 replays divided by 20 (GPU time without launch gaps), on fresh random
operands. The calls rotate over enough operand sets to move 200 MB (four
times the H200's 50 MB L2), so that weights come from memory as they do in a
step, not from the cache. Prints one JSON line per shape and form."""

import json
import re
import sys

import torch

CALLS = 20
COLD_BYTES = 200 << 20
LINE = re.compile(r"^(\S+) (\S+) (\S+) T=(\d+) (\S+) batch (\d+), M (\d+), "
                  r"N (\d+), K (\d+)$")


def graph_us(fn, calls=CALLS, replays=10):
    fn()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        fn()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(calls):
                fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end) * 1e3 / calls)
    times.sort()
    return times[len(times) // 2]


def rotating(make, bytes_per_set):
    """CALLS calls, each over the next of enough operand sets to miss L2."""
    sets = max(1, min(CALLS, -(-COLD_BYTES // max(1, int(bytes_per_set)))))
    fns = [make() for _ in range(sets)]
    state = {"i": 0}

    def call():
        fns[state["i"] % sets]()
        state["i"] += 1
    return call


def bf16_product(kind, batch, m, n, k):
    per_set = batch * 2 * (m * k + n * k + 2 * m * n)
    made = []

    def make():
        fn, out_bytes = bf16_one(kind, batch, m, n, k)
        made.append(out_bytes)
        return fn
    fn = rotating(make, per_set)
    return fn, made[0]


def bf16_one(kind, batch, m, n, k):
    x = torch.randn(batch, m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(batch, n, k, device="cuda", dtype=torch.bfloat16)
    if kind == "bf16-f32":
        # bf16 operands, f32 sums kept (PyTorch's out_dtype), as v4a's
        # compressor products.
        x2, w2 = x[0], w[0]
        try:
            torch.mm(x2, w2.t(), out_dtype=torch.float32)
            return lambda: torch.mm(x2, w2.t(), out_dtype=torch.float32), 4
        except (TypeError, RuntimeError):
            return lambda: torch.mm(x2, w2.t()), 2
    if batch == 1:
        x2, w2 = x[0], w[0]
        return lambda: torch.matmul(x2, w2.t()), 2
    return lambda: torch.bmm(x, w.transpose(1, 2)), 2


def fp8_product(m, n, k):
    return rotating(lambda: fp8_one(m, n, k), m * k + n * k + 2 * m * n)


def fp8_one(m, n, k):
    """The block-scaled fp8 form (M padded to 4 as v4a pads it)."""
    m4 = (m + 3) // 4 * 4
    blocks = (k + 127) // 128
    x = torch.randn(m4, k, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    xs = torch.rand(blocks, m4, device="cuda").t()  # [M, L], strides (1, M)
    ws = torch.rand(blocks, (n + 127) // 128, device="cuda")  # [L, N/128]
    ws = ws.t().contiguous().t()  # strides (1, L)
    fn = lambda: torch._scaled_mm(x, w.t(), scale_a=xs, scale_b=ws,
                                  out_dtype=torch.bfloat16)
    fn()
    return fn


def eager(shapes, calls=5):
    """For Nsight Compute: each shape's product `calls` times, launched one
    by one between two marker kernels (fills of 7 floats) that bracket the
    shape's calls in the profile. Prints the shapes in order."""
    marker = torch.empty(7, device="cuda")
    for (kind, batch, m, n, k), name, function in shapes:
        fn, _ = bf16_product(kind, batch, m, n, k)
        fn()
        torch.cuda.synchronize()
        marker.fill_(7.0)
        for _ in range(calls):
            fn()
        marker.fill_(7.0)
        torch.cuda.synchronize()
        print(json.dumps({"form": "torch " + kind, "name": name,
                          "batch": batch, "M": m, "N": n, "K": k,
                          "calls": calls}), flush=True)


def main():
    shapes = []
    for line in open(sys.argv[1]):
        hit = LINE.match(line.strip())
        if not hit:
            continue
        _, function, name, tokens, kind, batch, m, n, k = hit.groups()
        key = (kind, int(batch), int(m), int(n), int(k))
        if key not in [s[0] for s in shapes]:
            shapes.append((key, name, function))
    if "--eager" in sys.argv:
        eager(shapes)
        return
    for (kind, batch, m, n, k), name, function in shapes:
        fn, out_bytes = bf16_product(kind, batch, m, n, k)
        us = graph_us(fn)
        flop = 2.0 * batch * m * n * k
        moved = batch * (2.0 * (m * k + n * k) + out_bytes * m * n)
        record = {"form": "torch " + kind, "name": name, "function": function,
                  "batch": batch, "M": m, "N": n, "K": k, "us": round(us, 2),
                  "tflop_per_s": round(flop / us * 1e-6, 1),
                  "tb_per_s": round(moved / us * 1e-6, 3)}
        print(json.dumps(record), flush=True)
        fp8 = name.split("|")[0] in ("wq_a", "wkv", "wq_b", "wo_b",
                                     "indexer.wq_b")
        if kind == "bf16" and batch == 1 and fp8 and k % 128 == 0:
            try:
                us = graph_us(fp8_product(m, n, k))
            except RuntimeError as error:
                print(json.dumps({"form": "torch fp8 block-scaled",
                                  "name": name, "M": m, "N": n, "K": k,
                                  "error": str(error).splitlines()[0]}),
                      flush=True)
                continue
            moved = 1.0 * (m * k + n * k) + 2.0 * m * n
            print(json.dumps({"form": "torch fp8 block-scaled", "name": name,
                              "function": function, "batch": 1, "M": m,
                              "N": n, "K": k, "us": round(us, 2),
                              "tflop_per_s": round(flop / us * 1e-6, 1),
                              "tb_per_s": round(moved / us * 1e-6, 3)}),
                  flush=True)


if __name__ == "__main__":
    main()
