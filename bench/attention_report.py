"""One JSON line per attention kernel of an Nsight Compute CSV (bench/attention.sh):
the kernel's best time over the run's steps, and TFLOP/s by FlashMLA's count
2 * heads * rows * (D + D) per query token, rows being the token's selected
rows (window + compressed) at its position.

    attention_report.py CSV CONFIG BATCH CONTEXT TOKENS
"""

import csv
import io
import json
import re
import sys


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
    config = json.load(open(config_path))
    text = open(path).read().splitlines()
    start = next((i for i, l in enumerate(text) if l.startswith('"ID"')), None)
    if start is None:
        print(json.dumps({"attention": config_path, "error": "no kernels in " + path}))
        return
    times = {}
    for row in csv.DictReader(io.StringIO("\n".join(text[start:]))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"].split("(")[0]
        ns = float(row["Metric Value"].replace(",", ""))
        times.setdefault(name, []).append(ns)
    heads, width = config["num_attention_heads"], config["head_dim"]
    for name, values in sorted(times.items()):
        match = re.match(r"step_(\d+)_", name)
        ratio = int(match.group(1)) if match else 0
        selected = sum(rows_of(context + i, ratio, config) for i in range(tokens))
        flop = 2.0 * batch * heads * selected * (width + width)
        best = min(values)
        print(json.dumps({
            "attention": name, "ratio": ratio, "batch": batch,
            "context": context, "tokens": tokens,
            "rows_per_token": round(selected / tokens, 1),
            "us": round(best / 1e3, 2), "launches": len(values),
            "tflops": round(flop / best / 1e3, 1)}))


if __name__ == "__main__":
    main()
