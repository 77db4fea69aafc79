"""Turns bench/gemm-profile.sh's archive into a table, JSON and a chart.

usage: gemm_report.py PROFILE_DIR OUT_DIR

For each case (package, batch, context, tokens): the kernels of the timed
steps from Nsight Compute (each product's median over them); each run of
consecutive library kernels between v4a's own is one product, named in
order by v4a-check-gemms --sequence; beside it the same shape through the
library alone (gemm_library.py) and the v4a kernel launched right before it
(the one that prepares its input, for the products of x and wo_b: the
activation quantization). Writes OUT_DIR/gemms.json, gemms.md, gemms.svg."""

import csv
import json
import os
import re
import sys


def steps_of(path):
    """The kernels of each step the profile recorded, in order."""
    rows = []
    with open(path) as f:
        lines = [l for l in f if l.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ns = float(row["Metric Value"].replace(",", ""))
        rows.append((row["Kernel Name"], ns / 1e3, row["Grid Size"]))
    # A step starts with the first metadata kernel, its next kernel that is
    # not a metadata one being a step kernel (restoring the sequences
    # between steps runs the metadata alone, which ends a step).
    first = rows[0][0]

    def starts_step(i):
        for name, _, _ in rows[i + 1:]:
            if not name.startswith("meta_"):
                return name.startswith("step_")
        return False

    starts = [i for i, r in enumerate(rows) if r[0] == first and starts_step(i)]
    steps = []
    for n, begin in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(rows)
        step = rows[begin:end]
        lone = [i for i in range(1, len(step))
                if step[i][0] == first and not starts_step(begin + i)]
        steps.append(step[:lone[0]] if lone else step)
    # A lone metadata launch followed by a step is not a step of its own.
    longest = max(len(step) for step in steps)
    return [step for step in steps if len(step) == longest]


def timed_steps(path):
    """The steps a case's times come from: all but the first (it loads the
    kernels and plans the graphs) when there are three or more."""
    steps = steps_of(path)
    return steps[1:] if len(steps) >= 3 else steps[-1:]


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])


def is_v4a(name):
    return name.startswith("step_") or name.startswith("meta_")


SEQ = re.compile(r"^layer (\d+) (\S+) (\S+): (\S+) gemm (\d+) x (\d+) x (\d+) x (\d+)$")


def products_of(kernels, sequence):
    """[(layer, name, type, batch, M, N, K, us, kernels, before_us, before)]"""
    out, i, before = [], 0, (None, 0.0)
    order = iter(sequence)
    while i < len(kernels):
        name, us, grid = kernels[i]
        if is_v4a(name):
            before = (name, us)
            i += 1
            continue
        # One product: its main kernel and the reduction kernels after it
        # (split K); the next main kernel is the next product.
        total, names = us, [name.split("(")[0]]
        i += 1
        while (i < len(kernels) and not is_v4a(kernels[i][0]) and
               "reduce" in kernels[i][0].lower()):
            total += kernels[i][1]
            names.append(kernels[i][0].split("(")[0])
            i += 1
        product = next(order, None)
        out.append({"product": product, "us": total, "kernels": names,
                    "before": before[0], "before_us": before[1]})
    return out


def library_per_kernel(src):
    """The products alone under Nsight Compute (gemm_library.py --eager):
    per shape, the mean time of a call over the kernels between its two
    markers (fills), by (form, batch, M, N, K)."""
    path = os.path.join(src, "library-ncu.csv")
    if not os.path.exists(path):
        return {}
    shapes = [json.loads(l) for l in open(path) if l.startswith("{")]
    lines = [l for l in open(path) if l.startswith('"')]
    rows = [r for r in csv.DictReader(lines)
            if r.get("Metric Name") == "gpu__time_duration.sum"]
    groups, inside, current = [], False, []
    for r in rows:
        if "FillFunctor" in r["Kernel Name"]:
            if inside:
                groups.append(current)
            inside, current = not inside, []
        elif inside:
            current.append(float(r["Metric Value"].replace(",", "")) / 1e3)
    out = {}
    for shape, times in zip(shapes, groups):
        key = (shape["form"], shape["batch"], shape["M"], shape["N"], shape["K"])
        out[key] = round(sum(times) / shape["calls"], 2)
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    ceilings = [json.loads(l) for l in open(os.path.join(src, "ceilings.jsonl"))]
    library = [json.loads(l) for l in open(os.path.join(src, "library.jsonl"))]
    alone = {}
    for r in library:
        if "us" in r:
            alone[(r["form"], r.get("batch", 1), r["M"], r["N"], r["K"])] = r
    alone_ncu = library_per_kernel(src)
    cases, lines = [], []
    for entry in sorted(os.listdir(src)):
        if not entry.endswith(".ncu.csv"):
            continue
        case = entry[: -len(".ncu.csv")]
        sequence = []
        for l in open(os.path.join(src, case + ".sequence")):
            hit = SEQ.match(l.strip())
            if hit:
                layer, fn, name, kind, b, m, n, k = hit.groups()
                sequence.append({"layer": int(layer), "function": fn,
                                 "name": name, "type": kind, "batch": int(b),
                                 "M": int(m), "N": int(n), "K": int(k)})
        # Each product's time is its median over the timed steps (Nsight's
        # single runs vary by ~10% at a few microseconds), the step's too.
        steps = timed_steps(os.path.join(src, entry))
        per_step = [products_of(kernels, sequence) for kernels in steps]
        products = per_step[-1]
        for i, p in enumerate(products):
            p["us"] = median([s[i]["us"] for s in per_step if i < len(s)])
            p["runs"] = len(per_step)
        step_us = median([sum(us for _, us, _ in k) for k in steps])
        total = 0.0
        rows = []
        for p in products:
            q = p["product"] or {}
            form = ("torch fp8 block-scaled" if q.get("type") == "fp8"
                    else "torch " + q.get("type", "?"))
            key = (form, q.get("batch"), q.get("M"), q.get("N"), q.get("K"))
            ref = alone.get(key)
            flop = 2.0 * q.get("batch", 0) * q.get("M", 0) * q.get("N", 0) * q.get("K", 0)
            out_bytes = 4 if q.get("type") == "bf16-f32" else 2
            moved = q.get("batch", 0) * (2.0 * (q.get("M", 0) * q.get("K", 0) + q.get("N", 0) * q.get("K", 0))
                                         + out_bytes * q.get("M", 0) * q.get("N", 0))
            if q.get("type") == "fp8":
                moved = q["M"] * q["K"] + q["N"] * q["K"] + 2.0 * q["M"] * q["N"]
            total += p["us"]
            rows.append(dict(q, us=round(p["us"], 2),
                             tflop_per_s=round(flop / p["us"] * 1e-6, 1) if p["us"] else None,
                             tb_per_s=round(moved / p["us"] * 1e-6, 3) if p["us"] else None,
                             alone_us=ref["us"] if ref else None,
                             of_alone=round(ref["us"] / p["us"], 3) if ref and p["us"] else None,
                             alone_ncu_us=alone_ncu.get(key),
                             of_alone_ncu=round(alone_ncu[key] / p["us"], 3) if key in alone_ncu and p["us"] else None,
                             runs=p["runs"],
                             kernels=p["kernels"], before=p["before"],
                             before_us=round(p["before_us"], 2)))
        cases.append({"case": case, "step_us": round(step_us, 1),
                      "products_us": round(total, 1), "products": rows})
    json.dump({"ceilings": ceilings, "cases": cases},
              open(os.path.join(dst, "gemms.json"), "w"), indent=1)
    md = []
    for c in cases:
        md.append(f"### {c['case']}: products {c['products_us']} us of a {c['step_us']} us step")
        md.append("| layer | product | type | batch x M x N x K | in-step us | TFLOP/s | TB/s | alone us (graph) | alone/in-step | alone us (ncu) | alone/in-step | kernel before (us) |")
        md.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in c["products"]:
            md.append(f"| {r.get('layer')} | {r.get('name')} | {r.get('type')} | {r.get('batch')} x {r.get('M')} x {r.get('N')} x {r.get('K')} | {r['us']} | {r['tflop_per_s']} | {r['tb_per_s']} | {r['alone_us']} | {r['of_alone']} | {r['alone_ncu_us']} | {r['of_alone_ncu']} | {r['before']} ({r['before_us']}) |")
        md.append("")
    open(os.path.join(dst, "gemms.md"), "w").write("\n".join(md) + "\n")
    # Chart: per case, in-step against alone for every product (SVG).
    bars = [(c["case"], r) for c in cases for r in c["products"] if r["alone_us"]]
    width, row_h = 900, 14
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{row_h * len(bars) + 40}" font-family="sans-serif" font-size="10">',
           '<text x="5" y="14">in-step time / library-alone time per product (1.0 = library speed; bar = alone/in-step)</text>']
    for i, (case, r) in enumerate(bars):
        y = 24 + i * row_h
        frac = min(r["of_alone"] or 0, 1.5)
        svg.append(f'<text x="5" y="{y + 10}">{case} L{r.get("layer")} {r.get("name")[:28]}</text>')
        svg.append(f'<rect x="420" y="{y}" width="{frac * 300:.0f}" height="{row_h - 3}" fill="{"#4a4" if frac >= 0.9 else "#c44"}"/>')
        svg.append(f'<text x="{425 + frac * 300:.0f}" y="{y + 10}">{r["of_alone"]}</text>')
    svg.append(f'<line x1="{420 + 0.9 * 300}" y1="20" x2="{420 + 0.9 * 300}" y2="{24 + row_h * len(bars)}" stroke="#000" stroke-dasharray="3,3"/>')
    svg.append("</svg>")
    open(os.path.join(dst, "gemms.svg"), "w").write("\n".join(svg) + "\n")
    for c in cases:
        print(f"{c['case']}: products {c['products_us']} us, step {c['step_us']} us")


if __name__ == "__main__":
    main()
