"""Where a kernel's warps spend their time, from Nsight Compute's source
page (`ncu --import REPORT --page source --csv --print-source sass`):
the warp-state samples by stall reason, the executed instructions by
opcode with their share of the samples, and the most sampled instructions.

    python3 bench/ncu_stalls.py SASS.csv [TOP]
"""

import collections
import csv
import re
import sys


def main(path, top):
    rows = list(csv.reader(open(path)))
    header = rows[1]
    at = {name: i for i, name in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    samples_of = at["Warp Stall Sampling (All Samples)"]
    executed_of = at["Instructions Executed"]
    by_reason = collections.Counter()
    executed, sampled = collections.Counter(), collections.Counter()
    lines = []
    for row in rows[2:]:
        if len(row) < len(header):
            continue
        source = row[at["Source"]].strip()
        samples = int(row[samples_of] or 0)
        count = int(row[executed_of] or 0)
        for reason in reasons:
            by_reason[reason[len("stall_"):]] += int(row[at[reason]] or 0)
        opcode = re.sub(r"^@!?U?P\w+\s+", "", source).split(" ")[0].split(".")[0]
        executed[opcode] += count
        sampled[opcode] += samples
        lines.append((samples, count, row[at["Address"]][-5:], source))
    total_samples = sum(s for s, _, _, _ in lines)
    total_executed = sum(executed.values())
    print(f"samples {total_samples}, warp instructions executed {total_executed}")
    for reason, count in by_reason.most_common(12):
        print(f"  {reason:18s} {count:7d} {100 * count / total_samples:5.1f}%")
    print("opcode, share of executed instructions, share of samples:")
    for opcode, count in executed.most_common(20):
        print(f"  {opcode:10s} {100 * count / total_executed:5.1f}% "
              f"{100 * sampled[opcode] / total_samples:5.1f}%")
    for samples, count, address, source in sorted(lines, reverse=True)[:top]:
        print(f"  {samples:5d} samples {count:9d} executed  {address}  {source}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10)
