"""Per-kernel table of a bench/kernels-profile.sh run.

    python3 bench/kernels_report.py DIR [--json FILE] [--markdown FILE]

DIR holds what the tarball of bench/kernels-profile.sh unpacks to. For each
case (one --bench step under Nsight Compute) and each kernel of the step: its
family (from the name: <step>_<family><n>; library kernels as 'library'),
grid and block, time, DRAM bytes read and written, and those bytes per second
against the same run's device copy. A kernel passes the GPU kernels issue's
bar when it reaches 60% of the copy rate or runs under 5 us."""

import glob
import json
import os
import re
import sys

import ncu_csv


def family(name):
    m = re.match(r"^(step|meta)_\d+_\d+_\d+_\d+_([a-z_]+?)(\d+)$", name)
    if m:
        return m.group(2)
    return "library"


def read_case(path):
    kernels = {}
    for row in ncu_csv.rows(path) or []:
        k = kernels.setdefault(row["ID"], {
            "kernel": row["Kernel Name"], "grid": row["Grid Size"],
            "block": row["Block Size"]})
        k[row["Metric Name"]] = ncu_csv.value(row)
    out = []
    for k in kernels.values():
        out.append({
            "kernel": k["kernel"], "family": family(k["kernel"]),
            "grid": k["grid"], "block": k["block"],
            "us": k.get("gpu__time_duration.sum", 0) / 1e3,
            "bytes": k.get("dram__bytes_read.sum", 0) +
                     k.get("dram__bytes_write.sum", 0)})
    return out


def main():
    folder = sys.argv[1]
    args = sys.argv[2:]
    copy = None
    for line in open(os.path.join(folder, "ceilings.jsonl")):
        c = json.loads(line)
        if c["ceiling"] == "d2d copy":
            copy = c["tb_per_s"]
    report = {"copy_tb_per_s": copy, "cases": {}}
    md = [f"Device copy ceiling: {copy} TB/s.", ""]
    for path in sorted(glob.glob(os.path.join(folder, "*.ncu.csv"))):
        name = os.path.basename(path)[:-len(".ncu.csv")]
        kernels = read_case(path)
        bench = os.path.join(folder, name + ".bench")
        step = None
        if os.path.exists(bench):
            for line in open(bench):
                if line.startswith("{"):
                    step = json.loads(line)
        for k in kernels:
            k["tb_per_s"] = k["bytes"] / (k["us"] * 1e-6) / 1e12 if k["us"] else 0
            k["passes"] = k["us"] < 5 or k["tb_per_s"] >= 0.6 * copy
        report["cases"][name] = {"step": step, "kernels": kernels}
        total = sum(k["us"] for k in kernels)
        md.append(f"### {name}: {len(kernels)} kernels, {total / 1e3:.3f} ms "
                  f"of kernel time" + (f", step {step['median_ms']} ms (median)"
                                       if step else ""))
        md.append("")
        md.append("| kernel | family | grid | block | us | MB | TB/s | bar |")
        md.append("|---|---|---|---|---|---|---|---|")
        for k in kernels:
            md.append(f"| {k['kernel'][:48]} | {k['family']} | {k['grid']} | "
                      f"{k['block']} | {k['us']:.1f} | {k['bytes'] / 1e6:.2f} | "
                      f"{k['tb_per_s']:.2f} | {'ok' if k['passes'] else 'MISS'} |")
        md.append("")
        by = {}
        for k in kernels:
            f = by.setdefault(k["family"], [0, 0.0])
            f[0] += 1
            f[1] += k["us"]
        md.append("| family | kernels | us |")
        md.append("|---|---|---|")
        for f, (n, us) in sorted(by.items(), key=lambda x: -x[1][1]):
            md.append(f"| {f} | {n} | {us:.1f} |")
        md.append("")
    text = "\n".join(md)
    if "--json" in args:
        json.dump(report, open(args[args.index("--json") + 1], "w"), indent=1)
    if "--markdown" in args:
        open(args[args.index("--markdown") + 1], "w").write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
