"""An SVG chart of a bench/indexer.sh run: per decode shape, v4a's scores +
top-k (split into scores+select and merge) beside PyTorch's bf16 scores and
torch.topk on the same keys, in microseconds, log scale.

    indexer_chart.py RESULTS_DIR   (reads indexer.jsonl, writes indexer.svg)
"""

import json
import math
import os
import sys


def rows_of(lines):
    """(label, scores, merge, torch total or None) per decode shape."""
    torch = {}
    for r in lines:
        if r.get("torch") == "indexer" and r.get("k") == 512:
            torch[(r["batch"], r["rows"])] = r["scores_us"] + r["topk_us"]
    rows = []
    for r in lines:
        if "kernels" not in r or r.get("tokens") != 1:
            continue
        times = sorted(r["kernels"].items())
        scores = times[0][1]
        merge = times[1][1] if len(times) > 1 else 0.0
        pro = "pro" in r["model"]
        label = ("V4-Pro " if pro else "V4-Flash ") + \
            f'{r["batch"]} x {r["context"] // 1024}K'
        rows.append((label, scores, merge,
                     None if pro else torch.get((r["batch"],
                                                 r["context"] // 4))))
    return rows


def main():
    folder = sys.argv[1]
    lines = [json.loads(l) for l in open(os.path.join(folder, "indexer.jsonl"))
             if l.strip()]
    rows = rows_of(lines)
    top = max(max(s + m, t or 0) for _, s, m, t in rows)
    decades = math.ceil(math.log10(top))
    width, left, bar = 360, 150, 12

    def x(us):
        return left + width * max(math.log10(max(us, 1.0)), 0) / decades

    height = 40 + len(rows) * (2 * bar + 8)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 80}"'
           f' height="{height}" font-family="sans-serif" font-size="10">',
           '<text x="5" y="12">indexer decode, us (log): v4a scores+select '
           '(blue), merge (light blue); PyTorch bmm + topk (grey)</text>']
    for d in range(decades + 1):
        svg.append(f'<line x1="{x(10 ** d):.0f}" y1="18" x2="{x(10 ** d):.0f}"'
                   f' y2="{height - 4}" stroke="#ddd"/>')
        svg.append(f'<text x="{x(10 ** d) - 4:.0f}" y="{height - 6}">'
                   f'{10 ** d}</text>')
    y = 22
    for label, scores, merge, torch in rows:
        svg.append(f'<text x="5" y="{y + bar}">{label}</text>')
        svg.append(f'<rect x="{left}" y="{y}" width="{x(scores) - left:.0f}"'
                   f' height="{bar}" fill="#36c"/>')
        if merge:
            svg.append(f'<rect x="{x(scores):.0f}" y="{y}"'
                       f' width="{x(scores + merge) - x(scores):.0f}"'
                       f' height="{bar}" fill="#9bd"/>')
        svg.append(f'<text x="{x(scores + merge) + 3:.0f}" y="{y + bar - 2}">'
                   f'{scores + merge:.1f}</text>')
        if torch:
            svg.append(f'<rect x="{left}" y="{y + bar + 2}"'
                       f' width="{x(torch) - left:.0f}" height="{bar}"'
                       f' fill="#999"/>')
            svg.append(f'<text x="{x(torch) + 3:.0f}" y="{y + 2 * bar}">'
                       f'{torch:.0f}</text>')
        y += 2 * bar + 8
    svg.append("</svg>")
    open(os.path.join(folder, "indexer.svg"), "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
