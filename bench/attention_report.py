"""One JSON line per attention kernel of an Nsight Compute CSV (bench/attention.sh):
the kernel's best time over the run's steps, and TFLOP/s by FlashMLA's count
2 * heads * rows * (D + D) per query token, rows being the token's selected
rows (window + compressed) at its position.

    attention_report.py CSV CONFIG BATCH CONTEXT TOKENS [VARIANT]
"""

import json
import re
import sys

import ncu_csv


def rows_of(position, ratio, config):
    window = min(config["sliding_window"], position + 1)
    if ratio == 0:
        return window
    visible = (position + 1) // ratio
    if ratio == 4:
        return window + min(config["index_topk"], visible)
    return window + visible


def main():
    path, config_path = sys.argv[1], sys.argv[2]
    batch, context, tokens = (int(v) for v in sys.argv[3:6])
    variant = {"variant": sys.argv[6]} if len(sys.argv) > 6 and sys.argv[6] else {}
    config = json.load(open(config_path))
    times = ncu_csv.launch_times(path)
    if times is None:
        print(json.dumps({"attention": config_path, "error": "no kernels in " + path}))
        return
    heads, width = config["num_attention_heads"], config["head_dim"]
    for name, values in sorted(times.items()):
        match = re.match(r"step_(\d+)_", name)
        ratio = int(match.group(1)) if match else 0
        selected = sum(rows_of(context + i, ratio, config) for i in range(tokens))
        flop = 2.0 * batch * heads * selected * (width + width)
        best = min(values)
        print(json.dumps({
            "attention": name, **variant, "ratio": ratio, "batch": batch,
            "context": context, "tokens": tokens,
            "rows_per_token": round(selected / tokens, 1),
            "us": round(best / 1e3, 2), "launches": len(values),
            "tflops": round(flop / best / 1e3, 1)}))


if __name__ == "__main__":
    main()
