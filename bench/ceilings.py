"""The device's limits, measured in the same run as the timings: a
device-to-device copy (bytes read + written per second) and a large bf16
GEMM (FLOP per second). Prints one JSON line each."""

import json

import torch


def best_ms(fn, repeat=20):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        best = min(best, begin.elapsed_time(end))
    return best


def main():
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    ms = best_ms(lambda: b.copy_(a))
    print(json.dumps({"ceiling": "d2d copy", "bytes": 2 * n, "ms": round(ms, 4),
                      "tb_per_s": round(2 * n / ms / 1e9, 3)}), flush=True)
    del a, b
    m = 8192
    x = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    ms = best_ms(lambda: x @ y)
    print(json.dumps({"ceiling": "bf16 gemm 8192^3", "flop": 2 * m ** 3,
                      "ms": round(ms, 4),
                      "tflop_per_s": round(2 * m ** 3 / ms / 1e9, 1)}),
          flush=True)


if __name__ == "__main__":
    main()
