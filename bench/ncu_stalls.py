"""Where a kernel's warps spend their time, from Nsight Compute's source
page (`ncu --import REPORT --page source --csv --print-source sass`):
the warp-state samples by stall reason, the executed instructions by
opcode with their share of the samples, and the most sampled instructions.
For a kernel whose warpgroups trade registers (setmaxnreg), the samples
and instructions are also split by role: the code from the first
register trade (the copy warpgroups) to the first exit, and from the
second trade (the math warpgroups) to the next.

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
    lines, roles = [], []
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
        address = row[at["Address"]].strip()
        if re.fullmatch(r"(0x)?[0-9a-fA-F]+", address):
            roles.append((int(address, 16), opcode, samples, count,
                          {r[len("stall_"):]: int(row[at[r]] or 0) for r in reasons}))
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
    by_role(sorted(roles, key=lambda r: r[0]), total_samples)


def by_role(instructions, total_samples):
    """Samples, executed instructions and the leading stall reasons of the
    code between register trades and exits (see the module's text)."""
    trades = [a for a, opcode, _, _, _ in instructions if opcode == "USETMAXREG"]
    exits = [a for a, opcode, _, _, _ in instructions if opcode == "EXIT"]
    if len(trades) < 2 or len(exits) < 2:
        return
    # The first trade's role ends at the first exit after it; the second's
    # at the next exit after the second trade.
    first_end = min((a for a in exits if a > trades[0]), default=None)
    second_end = min((a for a in exits if a > trades[1]), default=None)
    if first_end is None or second_end is None:
        return
    marks = [trades[0], first_end, trades[1], second_end]

    def role(address):
        if address < marks[0]:
            return "entry"
        if address <= marks[1]:
            return "copy"
        if address <= marks[3]:
            return "math"
        return "after (retry loops)"

    samples, executed = collections.Counter(), collections.Counter()
    reasons = collections.defaultdict(collections.Counter)
    for address, _, count_samples, count, stalls in instructions:
        name = role(address)
        samples[name] += count_samples
        executed[name] += count
        reasons[name].update(stalls)
    print("by role (samples, share, warp instructions executed, leading stalls):")
    for name in ("entry", "copy", "math", "after (retry loops)"):
        leading = ", ".join(f"{r} {n}" for r, n in reasons[name].most_common(5))
        print(f"  {name:20s} {samples[name]:6d} {100 * samples[name] / max(total_samples, 1):5.1f}% "
              f"{executed[name]:10d}  {leading}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10)
