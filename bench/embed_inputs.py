"""embed_inputs.py DIR BATCH PROMPT STEPS HIDDEN: the inputs of
bench/embed.sh: step k's tokens packed as DIR/x{k}.bf16 for the programs,
and the same values as DIR/inputs.safetensors in v4a-run-package's
contract.  embed_inputs.py --compare DIR LAYER STEPS PROGRAM..: whether
each program's DIR/y{k}.PROGRAM.bf16 equals DIR/expected.safetensors."""
import os
import sys

import numpy as np

from v4a import safetensors


def bf16_bits(values):
    bits = values.astype(np.float32).view(np.uint32)
    return (bits >> 16).astype(np.uint16)






def make(folder, batch, prompt, steps, hidden):
    rng = np.random.default_rng(11)
    tensors = {}
    for k in range(steps + 1):
        length = prompt if k == 0 else 1
        # Values bf16 holds: the programs' bf16 and the runner's f32 agree.
        x = (rng.integers(-128, 129, (batch, length, hidden)) / 64.0)
        x = x.astype(np.float32)
        bf16_bits(x).tofile(os.path.join(folder, "x%d.bf16" % k))
        tensors["x.step%d" % k] = x
    safetensors.write(os.path.join(folder, "inputs.safetensors"), tensors)


def compare(folder, layer, steps, programs):
    expected = safetensors.read(os.path.join(folder, "expected.safetensors"))
    ok = True
    for program in programs:
        worst = 0
        for k in range(steps + 1):
            values = expected["y.step%d.layer%d" % (k, layer)].reshape(-1)
            want = bf16_bits(values)
            got = np.fromfile(os.path.join(folder, "y%d.%s.bf16" % (k, program)),
                              np.uint16)
            differ = int((got != want).sum())
            if differ:
                wide = (got.astype(np.uint32) << 16).view(np.float32)
                print("  step %d: %d of %d differ, max abs diff %.3e, max "
                      "|expected| %.3e" % (k, differ, got.size,
                                           np.abs(wide - values).max(),
                                           np.abs(values).max()))
            worst = max(worst, differ)
        print("%s: %d steps, %s" % (program, steps + 1,
                                    "bitwise equal to v4a-run-package" if not worst
                                    else "%d values differ" % worst))
        ok = ok and not worst
    return ok


if sys.argv[1] == "--compare":
    sys.exit(0 if compare(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                          sys.argv[5:]) else 1)
make(sys.argv[1], *map(int, sys.argv[2:6]))
