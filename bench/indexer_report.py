"""One JSON line per run of bench/indexer.sh: the indexer kernels' best time
over the run's steps (scores + top-k, and the merge when rows are split),
and the index keys' bytes per second (each token reads its sequence's
visible keys: (position + 1) // ratio rows of the layer's ratio, of the
key layout's bytes: bf16 2 * index_head_dim, fp8 index_head_dim + 4,
MXFP4 index_head_dim / 2 + index_head_dim / 32). A V4.1 candidate
source's keys are counted once: the least its two selections read.

    indexer_report.py CSV CONFIG BATCH CONTEXT TOKENS [bf16|fp8|mxfp4 [LAYER]]
"""

import json
import os
import sys

import ncu_csv


def main():
    path, config_path = sys.argv[1], sys.argv[2]
    batch, context, tokens = (int(v) for v in sys.argv[3:6])
    config = json.load(open(config_path))
    times = ncu_csv.launch_times(path)
    shape = {"model": config_path, "batch": batch, "context": context,
             "tokens": tokens}
    if os.environ.get("VARIANT"):
        shape["variant"] = os.environ["VARIANT"]
    if times is None:
        print(json.dumps(dict(shape, error="no kernels in " + path)))
        return
    # A step launches each kernel once: the best of the run's steps.
    kernels = {name: round(min(v) / 1e3, 2)
               for name, v in sorted(times.items())}
    layout = sys.argv[6] if len(sys.argv) > 6 else "mxfp4"
    layer = int(sys.argv[7]) if len(sys.argv) > 7 else 2
    ratio = config["compress_ratios"][layer]
    shape["layer"] = layer
    width = config["index_head_dim"]
    row_bytes = {"bf16": 2 * width, "fp8": width + 4,
                 "mxfp4": width // 2 + width // 32}[layout]
    shape["index_layout"] = layout
    keys = sum((context + t + 1) // ratio for t in range(tokens)) * batch
    total = sum(kernels.values())
    print(json.dumps(dict(
        shape, kernels=kernels, us=round(total, 2),
        key_bytes=keys * row_bytes,
        key_tb_s=round(keys * row_bytes / (total * 1e-6) / 1e12, 3)
        if total else None)))


if __name__ == "__main__":
    main()
