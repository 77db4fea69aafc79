"""engine.py: an inference engine's loop over v4a's attention layers.

    python3 examples/engine.py PACKAGE.v4apkg [--layers 2] [--requests 32]
    python3 examples/engine.py CONFIG.json --backend cpu ...   (compiles it)

Requests with different prompt and answer lengths arrive over time; each
step is one varlen batch of the prefills of newly admitted requests (whole
prompts, up to --prefill-tokens per step) and one decode token for every
running request; finished requests release their sequence and a waiting one
takes the slot. Activations are random (seeded): the point is the traffic.
Prints tokens per second. With --check, every step's inputs go to a
safetensors file in v4a-run's contract (one row per request, in request
order, the order this loop packs its batches in), v4a-run-package (or, on
the CPU, v4a-run) runs them, and the outputs must be equal bit for bit.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import v4a  # noqa: E402
from v4a import safetensors  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", help="a package, or a config.json with --backend")
    p.add_argument("--backend", choices=["cpu", "cuda"],
                   help="compile the config for this backend (libv4a.so)")
    p.add_argument("--layers", default="", help="layer ids, e.g. 2 (all)")
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--slots", type=int, default=8, help="sequence slots")
    p.add_argument("--prompt", default="16,300", help="prompt lengths: MIN,MAX")
    p.add_argument("--answer", default="4,32", help="decode tokens: MIN,MAX")
    p.add_argument("--arrivals", type=float, default=2.0,
                   help="requests arriving per step, on average")
    p.add_argument("--prefill-tokens", type=int, default=1024,
                   help="prompt tokens admitted per step at most")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--check", action="store_true",
                   help="rerun the steps in v4a-run-package (or v4a-run) "
                   "and compare bit for bit")
    p.add_argument("--bin", default=os.path.join(os.path.dirname(__file__),
                                                 "..", "build", "bin"),
                   help="where v4a-run-package and v4a-run are")
    return p.parse_args()


class Request:
    def __init__(self, rid, arrival, prompt, answer):
        self.id, self.arrival = rid, arrival
        self.prompt, self.answer = prompt, answer
        self.sequence, self.done = None, 0  # tokens processed


def make_requests(args, rng):
    low, high = map(int, args.prompt.split(","))
    alow, ahigh = map(int, args.answer.split(","))
    requests, step = [], 0.0
    for rid in range(args.requests):
        step += rng.exponential(1.0 / args.arrivals)
        requests.append(Request(rid, int(step), int(rng.integers(low, high + 1)),
                                int(rng.integers(alow, ahigh + 1))))
    return requests


class Device:
    """Activations as the model takes them: torch CUDA tensors (bf16) for a
    GPU model, NumPy f32 arrays on the CPU."""

    def __init__(self, cuda):
        self.cuda = cuda
        if cuda:
            import torch
            self.torch = torch
            self.stream = torch.cuda.Stream()

    def tensor(self, values):
        if not self.cuda:
            return values
        return self.torch.from_numpy(values).to(
            "cuda", dtype=self.torch.bfloat16, non_blocking=False)

    def host(self, tensor):
        if not self.cuda:
            return tensor
        return tensor.float().cpu().numpy()


def run(args):
    rng = np.random.default_rng(args.seed)
    layers = [int(x) for x in args.layers.split(",") if x]
    if args.backend:
        model = v4a.Model.compile(args.model, backend=args.backend,
                                  max_sequences=args.slots,
                                  layers=layers or None)
    else:
        model = v4a.Model.open_package(args.model, max_sequences=args.slots,
                                       layers=layers or None)
    model.load_random_weights(args.seed)
    info = model.info()
    dim, selected = info["hidden_size"], model.selected_layers()
    device = Device(info["backend"] == "cuda")
    requests = make_requests(args, rng)
    waiting, running, finished = list(requests), [], []
    steps, tokens, elapsed = [], 0, 0.0
    step = 0
    while len(finished) < len(requests):
        # Admit arrived requests into free slots, up to the prefill budget.
        budget = args.prefill_tokens
        while (waiting and waiting[0].arrival <= step and
               len(running) < args.slots and waiting[0].prompt <= budget):
            request = waiting.pop(0)
            request.sequence = model.add_sequence()
            budget -= request.prompt
            running.append(request)
        running.sort(key=lambda r: r.id)  # the batch in request order
        if not running:
            step += 1
            continue
        lengths = [r.prompt if r.done == 0 else 1 for r in running]
        count = sum(lengths)
        x = (rng.integers(-128, 129, (count, dim)) / 64).astype(np.float32)
        inputs = [device.tensor(x) for _ in selected]
        start = time.perf_counter()
        if device.cuda:
            with device.torch.cuda.stream(device.stream):
                outputs = model.step([r.sequence for r in running], lengths,
                                     inputs)
            device.stream.synchronize()
        else:
            outputs = model.step([r.sequence for r in running], lengths,
                                 inputs)
        elapsed += time.perf_counter() - start
        tokens += count
        if args.check:
            steps.append(([r.id for r in running], lengths, x,
                          [device.host(y) for y in outputs]))
        for r, n in zip(running, lengths):
            r.done += n
        for r in [r for r in running if r.done >= r.prompt + r.answer]:
            model.release_sequence(r.sequence)
            running.remove(r)
            finished.append(r)
        step += 1
    print("engine.py: %d requests in %d steps, %d tokens (%d slots): %.0f "
          "tokens/s in the steps" % (len(requests), step, tokens, args.slots,
                                     tokens / elapsed))
    model.close()
    return steps, selected, dim, len(requests), info["backend"]






def check(args, steps, selected, dim, rows, backend):
    """The same steps through the runner: one row per request, zero
    lengths for the requests a step does not carry."""
    folder = tempfile.mkdtemp()
    tensors = {}
    for k, (ids, lengths, x, _) in enumerate(steps):
        width = max(lengths)
        grid = np.zeros((rows, width, dim), np.float32)
        row_lengths = np.zeros(rows, np.int32)
        at = 0
        for rid, n in zip(ids, lengths):
            grid[rid, :n] = x[at:at + n]
            row_lengths[rid] = n
            at += n
        tensors["x.step%d" % k] = grid
        tensors["lengths.step%d" % k] = row_lengths
    inputs = os.path.join(folder, "inputs.safetensors")
    outputs = os.path.join(folder, "outputs.safetensors")
    safetensors.write(inputs, tensors)
    layers = ",".join(map(str, selected))
    if args.backend:
        # The context the loop compiled for (Model.compile's default).
        command = [os.path.join(args.bin, "v4a-run"), args.model,
                   "--backend=" + backend, "--random-weights", str(args.seed),
                   "--layers=" + layers, "--context=4096"]
    else:
        command = [os.path.join(args.bin, "v4a-run-package"), args.model,
                   "--random-weights", str(args.seed), "--layers", layers]
    command += ["--inputs", inputs, "--outputs", outputs]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        sys.exit("check: %s failed: %s" % (command[0], result.stderr.strip()))
    expected = safetensors.read(outputs)
    differ = 0
    for k, (ids, lengths, _, ys) in enumerate(steps):
        for layer, y in zip(selected, ys):
            want = expected["y.step%d.layer%d" % (k, layer)]
            at = 0
            for rid, n in zip(ids, lengths):
                got = y[at:at + n].astype(np.float32)
                differ += int((got != want[rid, :n]).sum())
                at += n
    print("check: %d steps against %s: %s" %
          (len(steps), os.path.basename(command[0]),
           "bitwise equal" if differ == 0 else "%d values differ" % differ))
    return differ == 0


def main():
    args = parse_args()
    steps, selected, dim, rows, backend = run(args)
    if args.check and not check(args, steps, selected, dim, rows, backend):
        sys.exit(1)


if __name__ == "__main__":
    main()
