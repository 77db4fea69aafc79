"""The indexer's picks against DeepSeek's reference picks (refdata's
intermediates, batch row 0). Per indexer layer: the tokens whose k picks
differ as sets, the picks swapped, and how close the swapped rows' scores
are in our run: our best row the reference did not keep against its worst
row we did not keep, as a fraction of the token's largest score magnitude.
Upstream roundings (an e2m1 rounding of a query or key that tips the other
way) swap rows whose scores are that close; a wider gap is a fault.

    compare_picks.py INTERMEDIATES OURS CONFIG [--max-gap G]

OURS: v4a-run --check --index-picks FILE (the reference implementation's
picks; the CPU backend's outputs match it bit for bit). The reference's
rows carry an offset: this step's rows in prefill, the window in decode.
Exit status 1 when a swap's gap exceeds G (default 0.01) or the rows we
kept in n swaps are not our n last picks.
"""

import json
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from v4a import safetensors  # noqa: E402


def picks_and_scores(path):
    """The file's index_topk and index_scores tensors (other dtypes, such as
    the intermediates' bf16 activations, are not read)."""
    return safetensors.read(
        path, only=lambda name: name.startswith(("index_topk.",
                                                 "index_scores.")))


def main():
    args = sys.argv[1:]
    max_gap = 0.01
    if "--max-gap" in args:
        i = args.index("--max-gap")
        max_gap = float(args[i + 1])
        del args[i:i + 2]
    theirs_path, ours_path, config_path = args
    config = json.load(open(config_path))
    theirs = picks_and_scores(theirs_path)
    ours = picks_and_scores(ours_path)
    # Per layer: tokens, tokens with a swap, swaps, largest gap, picks, and
    # swaps whose kept row is not among our last picks.
    totals = defaultdict(lambda: [0, 0, 0, 0.0, 0, 0])
    status = 0
    for name in sorted(theirs):
        if not name.startswith("index_topk."):
            continue
        _, step, layer = name.split(".")
        if name not in ours:
            print(f"{name}: missing from {ours_path}")
            status = 1
            continue
        tokens = theirs[name].shape[1]
        offset = tokens if step == "step0" else config["sliding_window"]
        scores = ours[name.replace("index_topk", "index_scores")]
        for t in range(tokens):
            want = {int(v) - offset for v in theirs[name][0, t] if v >= 0}
            got = {int(v) for v in ours[name][0, t] if v >= 0}
            total = totals[layer]
            total[0] += 1
            total[4] += len(want)
            if want == got:
                continue
            total[1] += 1
            s = [float(v) for v in scores[0, t]]
            scale = max((abs(v) for v in s if math.isfinite(v)), default=0.0)
            kept, dropped = sorted(got - want), sorted(want - got)
            # n swaps should take our n last picks.
            last = sorted(s[v] for v in got)[:len(kept)]
            bound = last[-1] if last else -math.inf
            if len(kept) != len(dropped):
                total[3] = math.inf
            # Every swap lies between our best kept row and the reference's
            # worst kept row that we dropped.
            total[2] += len(kept)
            spread = max((s[v] for v in kept), default=-math.inf) - min(
                (s[v] for v in dropped), default=math.inf)
            gap = spread / scale if scale > 0 else math.inf
            total[3] = max(total[3], gap if kept and dropped else 0.0)
            total[5] += sum(1 for v in kept if s[v] > bound)
    for layer, (count, differ, swaps, gap, picks, inside) in sorted(
            totals.items()):
        good = gap <= max_gap and inside == 0
        status |= not good
        print(f"{layer}: {count} tokens, {differ} with other picks, {swaps} "
              f"of {picks} picks swapped, {inside} not at our last places; "
              f"largest score gap {gap:.4f} of the token's largest score "
              f"(limit {max_gap}): {'ok' if good else 'FAIL'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
