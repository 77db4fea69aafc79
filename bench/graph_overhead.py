"""graph_overhead.py PACKAGE BATCH PROMPT STEPS [--graphs on|off]: the GPU
time between a decode step's kernels. The whole package (every layer) runs
a prefill of PROMPT tokens for BATCH sequences, then decode steps (the
first of a bucket on the stream, the second recorded, the rest replayed);
STEPS more are traced with the CUDA profiler (CUPTI, through
torch.profiler). For each traced step: its span on the GPU (the first
kernel's or copy's start to the last one's end), the busy time (the union
of the kernels' and copies' intervals) and the difference, which is the
launch overhead: with graphs, the gaps the GPU leaves between dependent
nodes; and the longest of those gaps (a host pause inside a step shows
there). The graph's own gaps are also counted from its first kernel on:
under the profiler the inputs' copies are followed by a pause while the
host submits the graph (~1.8 us a node with CUPTI recording each). Before
the trace, as many steps again (and one) run without the profiler; their
median time, from the host's call until the GPU is done, less the traced
busy time, is a step's whole overhead a layer (host, copies, submission,
gaps). Steps are told apart by a marker kernel before each. Printed per
step and per layer, medians over the traced steps, as one JSON line, with
the first traced step's nodes counted by kind (the generated kernels by
family, the library's kernels, copies and sets)."""
import json
import re
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import v4a

package, batch, prompt, steps = sys.argv[1], int(sys.argv[2]), int(
    sys.argv[3]), int(sys.argv[4])
graphs = "--graphs" not in sys.argv or sys.argv[sys.argv.index("--graphs") +
                                                 1] == "on"
model = v4a.Model.open_package(package, max_sequences=batch,
                               use_graphs=graphs)
model.load_random_weights(1)
layers = len(model.selected_layers())
dim = model.hidden_size
sequences = [model.add_sequence() for _ in range(batch)]
generator = torch.Generator(device="cuda").manual_seed(1)


def inputs(tokens):
    return [torch.randn(tokens, dim, device="cuda", dtype=torch.bfloat16,
                        generator=generator) for _ in range(layers)]


model.step(sequences, [prompt] * batch, inputs(batch * prompt))
x = inputs(batch)
y = [torch.empty_like(t) for t in x]
ones = [1] * batch
for _ in range(3):  # stream, record, first replay
    model.step(sequences, ones, x, y)
torch.cuda.synchronize()

# The same steps without the profiler: the host's call until the GPU is done
# (Model.step, input copies, the graph's submission, its run).
walls = []
for _ in range(2 * steps + 1):
    start = time.perf_counter()
    model.step(sequences, ones, x, y)
    torch.cuda.synchronize()
    walls.append((time.perf_counter() - start) * 1e6)
step_us = sorted(walls)[len(walls) // 2]

# A marker kernel (torch's spin kernel) opens each traced step: the steps
# are what lies between markers, whatever gaps the host leaves inside one.
with profile(activities=[ProfilerActivity.CUDA]) as trace:
    for _ in range(steps):
        torch.cuda._sleep(1)
        model.step(sequences, ones, x, y)
        torch.cuda.synchronize()
MARKER = "spin_kernel"
events = sorted((e for e in trace.events() if e.device_type.name == "CUDA"),
                key=lambda e: e.time_range.start)


def kind(name):
    """A generated kernel's family (step_<key>_rows3 -> rows); the rest by
    what it is (the step's table copies are copies)."""
    generated = re.match(r"(?:step|meta)_[0-9_]+?_([a-z]+)[0-9]*$", name)
    if generated:
        return ("meta_" if name.startswith("meta") else "") + generated[1]
    if "Memcpy" in name or "memcpy" in name or name == "v4a_copy_table":
        return "copy"
    if "Memset" in name or "memset" in name:
        return "set"
    return "library"


def split_steps(events):
    """The traced steps: each marker's following events up to the next."""
    groups = []
    for e in events:
        if MARKER in e.name:
            groups.append([])
        elif groups:
            groups[-1].append(e)
    return [g for g in groups if g]


def busy(group):
    """The union of the intervals' lengths, and the longest idle stretch
    between them (a host gap inside a step stands out there)."""
    total, reach, longest = 0.0, None, 0.0
    for start, end in group:
        if reach is None or start > reach:
            if reach is not None:
                longest = max(longest, start - reach)
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total, longest


steps_traced = split_steps(events)
kinds = {}
for e in steps_traced[0] if steps_traced else []:
    kinds[kind(e.name)] = kinds.get(kind(e.name), 0) + 1

rows = []
for group in steps_traced:
    intervals = sorted((e.time_range.start, e.time_range.end) for e in group)
    span = max(end for _, end in intervals) - intervals[0][0]
    used, longest = busy(intervals)
    first_kernel = min(e.time_range.start for e in group
                       if kind(e.name) not in ("copy", "set"))
    graph = [(start, end) for start, end in intervals if start >= first_kernel]
    graph_used, _ = busy(graph)
    graph_span = max(end for _, end in graph) - first_kernel
    rows.append({"nodes": len(group), "span_us": span, "busy_us": used,
                 "gaps_us": span - used, "longest_gap_us": longest,
                 "graph_gaps_us": graph_span - graph_used})


def median(key):
    values = sorted(r[key] for r in rows)
    return values[len(values) // 2]


result = {"package": package, "graphs": graphs, "layers": layers,
          "batch": batch, "prompt": prompt, "steps": len(rows),
          "nodes": median("nodes"), "span_us": round(median("span_us"), 1),
          "busy_us": round(median("busy_us"), 1),
          "gaps_us": round(median("gaps_us"), 1),
          "gaps_per_layer_us": round(median("gaps_us") / layers, 2),
          "longest_gap_us": round(median("longest_gap_us"), 1),
          "graph_gaps_us": round(median("graph_gaps_us"), 1),
          "graph_gaps_per_layer_us": round(median("graph_gaps_us") / layers,
                                           2),
          "nodes_per_layer": round(median("nodes") / layers, 1),
          "step_us": round(step_us, 1),
          "overhead_per_layer_us": round((step_us - median("busy_us")) /
                                         layers, 2),
          "first_step_nodes_by_kind": dict(sorted(kinds.items()))}
print(json.dumps(result))
