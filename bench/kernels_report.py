"""Per-kernel table of a bench/kernels-profile.sh run.

    python3 bench/kernels_report.py DIR [--json FILE] [--markdown FILE]

DIR holds what the tarball of bench/kernels-profile.sh unpacks to. For each
case (one --bench step under Nsight Compute) and each kernel of the step: its
family (from the name: <step>_<family><n>; library kernels as 'library'),
grid and block, time, DRAM bytes read and written, the bytes it touched, and
those per second against the same run's device copy. A kernel passes the GPU
kernels issue's bar when it reaches 60% of the copy rate on the bytes it
touched or runs under 5 us.

The bytes a kernel touched are measured, not modelled: Nsight Compute
flushes the caches before each kernel, so every sector the kernel reads
comes from DRAM once (dram__bytes_read), and every sector its SMs write
reaches L2 (lts__t_sectors_srcunit_tex_op_write, 32 bytes each). DRAM
writes alone undercount: a written row may stay in L2 past the kernel's
end; and L2 counts no write as a lookup miss, so written sectors cannot
be told apart from sectors written again. A sector read twice counts
once, as a minimum would; a sector written twice, or written in part,
counts 32 bytes each time, more than a minimum would (only where a
kernel scatters small writes: the metadata's, a cache store's). Where
the run lacks the write counter, the DRAM bytes stand in, and the table
says so."""

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
    if name.startswith("v4a_copy_table"):
        return "copy"
    return "library"


def warm_times(path):
    """Per launch ID, (kernel name, us) from the unflushed pass; {} without."""
    times = {}
    for row in (ncu_csv.rows(path) if os.path.exists(path) else None) or []:
        if row["Metric Name"] == "gpu__time_duration.sum":
            times[row["ID"]] = (row["Kernel Name"], ncu_csv.value(row) / 1e3)
    return times


def read_case(path):
    warm = warm_times(path[:-len(".ncu.csv")] + ".warm.csv")
    kernels = {}
    for row in ncu_csv.rows(path) or []:
        k = kernels.setdefault(row["ID"], {
            "kernel": row["Kernel Name"], "grid": row["Grid Size"],
            "block": row["Block Size"]})
        k[row["Metric Name"]] = ncu_csv.value(row)
    out = []
    for launch, k in kernels.items():
        name, warm_us = warm.get(launch, (None, None))
        dram = k.get("dram__bytes_read.sum", 0) + k.get("dram__bytes_write.sum", 0)
        written = k.get(WRITTEN_SECTORS)
        out.append({
            "kernel": k["kernel"], "family": family(k["kernel"]),
            "grid": k["grid"], "block": k["block"],
            "us": k.get("gpu__time_duration.sum", 0) / 1e3,
            "warm_us": warm_us if name == k["kernel"] else None,
            "dram_bytes": dram,
            "touched_bytes": None if written is None else
                             k.get("dram__bytes_read.sum", 0) + 32 * written})
    return out


# The families the GPU kernels issue's bar applies to; the attention and the
# indexer have issues of their own, the library's GEMMs are cuBLASLt's.
OWN_FAMILIES = ("rows", "loops", "copy")

WRITTEN_SECTORS = "lts__t_sectors_srcunit_tex_op_write.sum"


def passes(us, rated, copy_tb_per_s):
    """The GPU kernels issue's bar: under 5 us, or 60% of the copy rate."""
    return us < 5 or rated / (us * 1e-6) / 1e12 >= 0.6 * copy_tb_per_s


def listed(names):
    return ", ".join(names) if names else "none"


def mark(passed):
    return "-" if passed is None else "ok" if passed else "MISS"


def rated_bytes(k):
    return k["dram_bytes"] if k["touched_bytes"] is None else k["touched_bytes"]


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
            k["tb_per_s"] = rated_bytes(k) / (k["us"] * 1e-6) / 1e12 if k["us"] else 0
            k["passes"] = passes(k["us"], rated_bytes(k), copy)
            k["passes_unflushed"] = (None if k["warm_us"] is None else
                                     passes(k["warm_us"], rated_bytes(k), copy))
        report["cases"][name] = {"step": step, "kernels": kernels}
        total = sum(k["us"] for k in kernels)
        md.append(f"### {name}: {len(kernels)} kernels, {total / 1e3:.3f} ms "
                  f"of kernel time" + (f", step {step['median_ms']} ms (median)"
                                       if step else ""))
        if any(k["touched_bytes"] is None for k in kernels):
            md.append("")
            md.append("This run lacks the L2 write counter: the TB/s column "
                      "rates DRAM bytes, which undercount a kernel's writes.")
        md.append("")
        md.append("| kernel | family | grid | block | us | us, unflushed | DRAM MB "
                  "| touched MB | TB/s (touched) | bar | bar, unflushed |")
        md.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for k in kernels:
            touched = ("-" if k["touched_bytes"] is None else
                       f"{k['touched_bytes'] / 1e6:.2f}")
            warm = "-" if k["warm_us"] is None else f"{k['warm_us']:.1f}"
            md.append(f"| {k['kernel'][:48]} | {k['family']} | {k['grid']} | "
                      f"{k['block']} | {k['us']:.1f} | {warm} | "
                      f"{k['dram_bytes'] / 1e6:.2f} "
                      f"| {touched} | {k['tb_per_s']:.2f} | "
                      f"{mark(k['passes'])} | {mark(k['passes_unflushed'])} |")
        md.append("")
        own = [k for k in kernels if k["family"] in OWN_FAMILIES]
        misses = sorted({k["kernel"] for k in own if not k["passes"]})
        warm_misses = sorted({k["kernel"] for k in own
                              if k["passes_unflushed"] is False})
        single = sorted({k["kernel"] for k in own if k["grid"] == "(1, 1, 1)"})
        unflushed = any(k["warm_us"] is not None for k in own)
        md.append(f"The GPU kernels issue's families ({', '.join(OWN_FAMILIES)}): "
                  f"{len(own)} launches; below the bar: {listed(misses)}; "
                  f"below it unflushed: "
                  f"{listed(warm_misses) if unflushed else 'not measured'}; "
                  f"one-block grids: {listed(single)}.")
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
