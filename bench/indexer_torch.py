"""The indexer in PyTorch on the same shapes as bench/indexer.sh: scores
sum_h relu(q_h . k_j) * w_h (bf16 products as torch.matmul gives them, the
head sum in f32) and torch.topk, each timed alone (CUDA events, best of
20). One JSON line per shape."""

import json

import torch

from ceilings import best_ms


def main():
    heads, width = 64, 128
    for batch, rows, k in [(1, 16384, 512), (32, 16384, 512),
                           (128, 16384, 512), (128, 16384, 1024),
                           (1, 65536, 512), (32, 65536, 512),
                           (1, 262144, 512)]:
        q = torch.randn(batch, heads, width, device="cuda",
                        dtype=torch.bfloat16)
        keys = torch.randn(batch, rows, width, device="cuda",
                           dtype=torch.bfloat16)
        w = torch.randn(batch, heads, 1, device="cuda")

        def scores():
            dots = torch.bmm(q, keys.transpose(1, 2)).float()
            return (dots.relu() * w).sum(1)

        s = scores()
        score_ms = best_ms(scores)
        topk_ms = best_ms(lambda: torch.topk(s, k, dim=1))
        print(json.dumps({"torch": "indexer", "batch": batch, "rows": rows,
                          "k": k, "scores_us": round(score_ms * 1e3, 2),
                          "topk_us": round(topk_ms * 1e3, 2),
                          "key_tb_s": round(keys.numel() * 2 /
                                            (score_ms * 1e-3) / 1e12, 3)}))


if __name__ == "__main__":
    main()
