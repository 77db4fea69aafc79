"""cpu_steps.py CONFIG INPUTS OUTPUTS: the Python package on the CPU backend.

Compiles CONFIG through libv4a.so, loads random weights (seed 1, as v4a-run
--random-weights 1), checks that every misuse raises V4AError with the
library's message, and runs a varlen batch (prefills beside decodes, a
sequence released and its slot reused) from NumPy arrays; writes the inputs
and outputs in v4a-run's contract so that v4a-run can rerun and check them.
"""
import sys

import numpy as np

import v4a
from v4a import safetensors

STEPS = [[7, 5, 0], [1, 1, 3], [1, 0, 1], [1, 1, 1]]


def expect_error(what, text, call):
    try:
        call()
    except (v4a.V4AError, TypeError) as error:
        if text not in str(error):
            sys.exit("FAIL: %s: %s, expected '%s'" % (what, error, text))
        print("ok: %s: %s" % (what, error))
        return
    sys.exit("FAIL: %s did not fail" % what)




config, inputs_path, outputs_path = sys.argv[1:4]
print(v4a.version())
expect_error("unknown backend", "backend is 'tpu'",
             lambda: v4a.Model.compile(config, backend="tpu"))
expect_error("invalid JSON", "malformed JSON",
             lambda: v4a.Model.compile("{ 1"))
expect_error("missing package", "cannot open",
             lambda: v4a.Model.open_package("/nonexistent.v4apkg"))

model = v4a.Model.compile(config, max_sequences=3)
expect_error("a step before weights", "no weights are loaded",
             lambda: model.add_sequence())
model.load_random_weights(1)
expect_error("weights twice", "loaded already",
             lambda: model.load_random_weights(1))
info = model.info()
layers = model.selected_layers()
dim = info["hidden_size"]
print("%s model: %d layers, hidden %d, %d slots" %
      (info["backend"], len(layers), dim, info["max_sequences"]))
sequences = [model.add_sequence() for _ in range(3)]
expect_error("no free slot", "sequence slots", model.add_sequence)

rng = np.random.default_rng(7)
files = [{}, {}]
for k, lengths in enumerate(STEPS):
    tokens, padded = sum(lengths), max(lengths)
    packed = (rng.integers(-256, 257, (tokens, dim)) / 128).astype(np.float32)
    x = [packed.copy() for _ in layers]
    if k == 1:
        expect_error("a wrong shape", "the step needs",
                     lambda: model.step(sequences, lengths,
                                        [np.zeros((tokens, dim - 1),
                                                  np.float32) for a in x]))
        expect_error("float64", "f32 or bf16 is needed",
                     lambda: model.step(sequences, lengths,
                                        [a.astype(np.float64) for a in x]))
        expect_error("not contiguous", "not contiguous",
                     lambda: model.step(sequences, lengths,
                                        [np.ones((tokens, 2 * dim),
                                                 np.float32)[:, ::2]
                                         for a in x]))
        expect_error("too few tensors", "per selected layer",
                     lambda: model.step(sequences, lengths, x[:-1]))
        expect_error("a stream on the CPU", "no stream",
                     lambda: model.step(sequences, lengths, x, stream=5))
        expect_error("an unknown sequence", "unknown or finished sequence 9",
                     lambda: model.step(sequences[:2] + [9], lengths, x))
        expect_error("no __dlpack__", "has no __dlpack__",
                     lambda: model.step(sequences, lengths,
                                        [a.tolist() for a in x]))
    ys = model.step(sequences, lengths, x)
    grid = np.zeros((3, padded, dim), np.float32)
    row = 0
    for b, n in enumerate(lengths):
        grid[b, :n] = packed[row:row + n]
        row += n
    files[0]["x.step%d" % k] = grid.copy()
    files[0]["lengths.step%d" % k] = np.array(lengths, np.int32)
    for layer, y in zip(layers, ys):
        grid[:] = 0
        row = 0
        for b, n in enumerate(lengths):
            grid[b, :n] = y[row:row + n]
            row += n
        files[1]["y.step%d.layer%d" % (k, layer)] = grid.copy()

assert model.position(sequences[0]) == 10, model.position(sequences[0])
model.release_sequence(sequences[1])
expect_error("a released sequence", "unknown or released sequence",
             lambda: model.position(sequences[1]))
assert model.add_sequence() == sequences[1]
assert model.position(sequences[1]) == 0
expect_error("a cache component", "unknown cache component 'kv'",
             lambda: model.cache_size(layers[0], "kv"))
model.close()
expect_error("a closed model", "the model is closed", model.add_sequence)
safetensors.write(inputs_path, files[0])
safetensors.write(outputs_path, files[1])
print("PASS")
