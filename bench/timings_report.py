"""Collects the JSON lines of bench/timings.sh into one JSON file and a PNG
chart, with each time's achieved bandwidth and FLOP rate against the
ceilings measured in the same run.

    python3 bench/timings_report.py LINES.jsonl CONFIG OUT.json OUT.png

Bytes and FLOPs are the minimum a step must move and compute: every weight
of the layer read once (1 byte per fp8 value, 2 per bf16), the cache rows
the step reads (bf16 rows of D values, index keys of Di), the activations;
FLOPs are 2 per multiply-add of the projections, the compressor, the index
scores and the attention (QK and PV over the rows each query sees)."""

import json
import sys


def layer_costs(config, ratio, batch, context, tokens, fp8):
    dim, H, D = config["hidden_size"], config["num_attention_heads"], config["head_dim"]
    ql, ol, G = config["q_lora_rank"], config["o_lora_rank"], config["o_groups"]
    Hi, Di, K, w = (config["index_n_heads"], config["index_head_dim"],
                    config["index_topk"], config["sliding_window"])
    coff = 2 if ratio == 4 else 1
    gemm = {"wq_a": ql * dim, "wq_b": H * D * ql, "wkv": D * dim,
            "wo_a": G * ol * (H * D // G), "wo_b": dim * G * ol}
    other = {}
    if ratio:
        other["compressor"] = 2 * coff * D * dim
    if ratio == 4:
        gemm["indexer.wq_b"] = Hi * Di * ql
        other["weights_proj"] = Hi * dim
        other["indexer.compressor"] = 2 * 2 * Di * dim
    params_fp8 = sum(gemm.values())
    params = params_fp8 + sum(other.values())
    weight_bytes = params_fp8 * (1 if fp8 else 2) + 2 * sum(other.values())
    macs = batch * tokens * params
    cache_bytes = 0
    if tokens == 1:  # decode: each of `batch` sequences at `context`
        n = context + 1
        rows = min(n, w)
        cache_bytes += batch * rows * D * 2
        if ratio == 4:
            visible = n // 4
            cache_bytes += batch * (visible * Di * 2 + min(K, visible) * D * 2)
            macs += batch * Hi * visible * Di
            rows += min(K, visible)
        elif ratio:
            visible = n // ratio
            cache_bytes += batch * visible * D * 2
            rows += visible
        macs += batch * 2 * H * rows * D
    else:  # prefill of one sequence of `tokens`
        for i in range(tokens):
            rows = min(i + 1, w)
            if ratio == 4:
                visible = (i + 1) // 4
                macs += Hi * visible * Di
                rows += min(K, visible)
            elif ratio:
                rows += (i + 1) // ratio
            macs += 2 * H * rows * D
    act_bytes = 2 * 2 * batch * tokens * dim
    return weight_bytes + cache_bytes + act_bytes, 2 * macs


def main():
    lines, config_path, out_json, out_png = sys.argv[1:5]
    config = json.load(open(config_path))
    records = [json.loads(line) for line in open(lines) if line.startswith("{")]
    ceilings = {r["ceiling"]: r for r in records if "ceiling" in r}
    copy = ceilings.get("d2d copy", {}).get("tb_per_s")
    gemm = ceilings.get("bf16 gemm 8192^3", {}).get("tflop_per_s")
    rows = []
    for r in records:
        if "error" in r:
            print(f"failed: {r}")
        if "ceiling" in r or "error" in r:
            continue
        ratio = config["compress_ratios"][r["layer"]]
        fp8 = r.get("weights") == "fp8"
        nbytes, flop = layer_costs(config, ratio, r["batch"], r["context"],
                                   r["tokens"], fp8)
        seconds = r["median_ms"] / 1e3
        r.update(ratio=ratio, bytes=nbytes, flop=flop,
                 tb_per_s=round(nbytes / seconds / 1e12, 6),
                 tflop_per_s=round(flop / seconds / 1e12, 4))
        if copy:
            r["of_copy"] = round(r["tb_per_s"] / copy, 6)
        if gemm:
            r["of_gemm"] = round(r["tflop_per_s"] / gemm, 6)
        rows.append(r)
    json.dump({"ceilings": ceilings, "results": rows}, open(out_json, "w"), indent=1)

    def case(r):
        if r["tokens"] == 1:
            return f"decode r{r['ratio']} B{r['batch']}"
        return f"prefill r{r['ratio']} {r['tokens']}"
    cases = sorted({case(r) for r in rows}, key=lambda c: (c.startswith("prefill"), c))
    impls = sorted({r["impl"] for r in rows})
    print(f"ceilings: copy {copy} TB/s, bf16 GEMM {gemm} TFLOP/s")
    print(f"| case | {' | '.join(impls)} |")
    print("|---|" + "---|" * len(impls))
    for c in cases:
        cells = []
        for impl in impls:
            hit = [r for r in rows if case(r) == c and r["impl"] == impl]
            cells.append(f"{hit[0]['median_ms']:.3g} ms, {hit[0]['tb_per_s']:.2g} TB/s, "
                         f"{hit[0]['tflop_per_s']:.2g} TFLOP/s" if hit else "-")
        print(f"| {c} | {' | '.join(cells)} |")
    title = (f"One V4-Flash attention layer on the H200 (copy {copy} TB/s, "
             f"bf16 GEMM {gemm} TFLOP/s): ms per step, median, log scale")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        write_svg_chart(rows, cases, impls, case, title, out_png)
        return
    fig, ax = plt.subplots(figsize=(12, 5))
    width = 0.8 / max(len(impls), 1)
    for k, impl in enumerate(impls):
        xs, ys = [], []
        for i, c in enumerate(cases):
            hit = [r for r in rows if case(r) == c and r["impl"] == impl]
            if hit:
                xs.append(i + k * width)
                ys.append(hit[0]["median_ms"])
        ax.bar(xs, ys, width, label=impl)
    ax.set_xticks([i + width * (len(impls) - 1) / 2 for i in range(len(cases))])
    ax.set_xticklabels(cases, rotation=20, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("ms per step (median, log scale)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)


def write_svg_chart(rows, cases, impls, case, title, out_png):
    """The same chart without matplotlib: an SVG, turned into the PNG by
    rsvg-convert (librsvg2-bin) where it is installed."""
    import math
    import shutil
    import subprocess
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]
    width, height, left, bottom, top = 1500, 560, 80, 100, 60
    plot_w, plot_h = width - left - 330, height - bottom - top
    values = [r["median_ms"] for r in rows]
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    def y(v):
        return top + plot_h * (1 - (math.log10(v) - math.log10(lo)) /
                               (math.log10(hi) - math.log10(lo)))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" font-family="sans-serif" font-size="13">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="30" font-size="16">{title}</text>']
    decade = lo
    while decade <= hi:
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(decade):.1f}" '
                   f'y2="{y(decade):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{y(decade) + 4:.1f}" '
                   f'text-anchor="end">{decade:g} ms</text>')
        decade *= 10
    group = plot_w / max(len(cases), 1)
    bar = group * 0.8 / max(len(impls), 1)
    for i, c in enumerate(cases):
        for k, impl in enumerate(impls):
            hit = [r for r in rows if case(r) == c and r["impl"] == impl]
            if not hit:
                continue
            x = left + i * group + group * 0.1 + k * bar
            top_y = y(hit[0]["median_ms"])
            out.append(f'<rect x="{x:.1f}" y="{top_y:.1f}" width="{bar:.1f}" '
                       f'height="{top + plot_h - top_y:.1f}" '
                       f'fill="{colors[k % len(colors)]}"/>')
        cx = left + i * group + group / 2
        out.append(f'<text transform="translate({cx:.1f},{top + plot_h + 14}) '
                   f'rotate(30)">{c}</text>')
    for k, impl in enumerate(impls):
        ly = top + 20 * k
        out.append(f'<rect x="{left + plot_w + 20}" y="{ly}" width="14" '
                   f'height="14" fill="{colors[k % len(colors)]}"/>')
        out.append(f'<text x="{left + plot_w + 40}" y="{ly + 12}">{impl}</text>')
    out.append("</svg>")
    svg = out_png[:-4] + ".svg" if out_png.endswith(".png") else out_png + ".svg"
    with open(svg, "w") as f:
        f.write("\n".join(out) + "\n")
    if shutil.which("rsvg-convert"):
        subprocess.run(["rsvg-convert", "-o", out_png, svg], check=False)
    else:
        print(f"no matplotlib or rsvg-convert: the chart is {svg}")


if __name__ == "__main__":
    main()
