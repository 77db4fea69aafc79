"""Recomputes a model's KV memory from its config.json, from the formulas of
the specification, and compares it with `v4a-compile --report=json`.

usage: check_report.py CONFIG.json REPORT.json CONTEXT
Prints one line per checked quantity; exits 1 on the first mismatch."""
import json
import sys

PAGE, ALIGN = 64, 256


def up(value, multiple):
    return -(-value // multiple) * multiple


def main():
    config = json.load(open(sys.argv[1]))
    report = json.load(open(sys.argv[2]))
    context = int(sys.argv[3])
    n = config["num_hidden_layers"]
    ratios = config["compress_ratios"][:n]
    D, Di, w = config["head_dim"], config["index_head_dim"], config["sliding_window"]
    w = min(w, context)  # a window never holds more than the context
    kv_sources = config.get("kv_source_layer_ids")

    def kv_source(layer):
        if kv_sources is None or ratios[layer] == 0:
            return layer
        return max(s for s in kv_sources if s <= layer)

    sparse = [r in (1, 2, 4) for r in ratios]
    owners = [l for l in range(n) if ratios[l] > 0 and kv_source(l) == l]
    compressed = [l for l in range(n) if ratios[l] > 0]
    fp8_nope = D - 64
    row = {
        "bf16": {"main": 2 * D, "index": 2 * Di},
        "fp8": {"main": up(fp8_nope + 2 * 64 + fp8_nope // 64, 8), "index": Di + 4},
        "mxfp4": {"main": up(fp8_nope + 2 * 64 + fp8_nope // 64, 8), "index": Di // 2 + Di // 32},
    }
    expected = {}
    for kind in ("bf16", "fp8", "mxfp4"):
        main_row, index_row = row[kind]["main"], row[kind]["index"]

        def comp_rows(l):
            return up(context // ratios[l], PAGE)

        def state_bytes(l):
            coff = 2 if ratios[l] == 4 else 1
            return up(coff * ratios[l] * 2 * coff * D * 4, ALIGN)

        def indexer_state_bytes(l):
            return up(2 * ratios[l] * 4 * Di * 4, ALIGN) if ratios[l] == 4 else 0

        for shared, layers in (("shared", owners), ("unshared", compressed)):
            e = expected.setdefault(kind, {})
            window_rows = n * w
            rows = sum(comp_rows(l) for l in layers)
            e[("window", "rows_" + shared)] = window_rows
            e[("window", "bytes_" + shared)] = up(w * main_row, ALIGN) * n
            e[("compressed", "rows_" + shared)] = rows
            e[("compressed", "bytes_" + shared)] = sum(up(comp_rows(l) * main_row, ALIGN) for l in layers)
            e[("main_kv", "rows_" + shared)] = window_rows + rows
            idx = [l for l in layers if sparse[l]]
            e[("index_keys", "caches_" + shared)] = len(idx)
            e[("index_keys", "rows_" + shared)] = sum(comp_rows(l) for l in idx)
            e[("index_keys", "bytes_" + shared)] = sum(up(comp_rows(l) * index_row, ALIGN) for l in idx)
            e[("compressor_state", "bytes_" + shared)] = sum(state_bytes(l) for l in layers)
            e[("total", "bytes_" + shared)] = (
                e[("window", "bytes_" + shared)] + e[("compressed", "bytes_" + shared)]
                + e[("index_keys", "bytes_" + shared)] + e[("compressor_state", "bytes_" + shared)]
                + sum(indexer_state_bytes(l) for l in idx))
        expected[kind][("main_kv", "row_bytes")] = [main_row]
        if any(sparse):
            expected[kind][("index_keys", "dims")] = [Di]
            expected[kind][("index_keys", "row_bytes")] = [index_row]
    for kind, values in expected.items():
        for (component, field), value in sorted(values.items()):
            actual = report["memory"][kind].get(component, {}).get(field, 0 if "caches" in field or "bytes" in field or "rows" in field else None)
            status = "OK" if actual == value else "MISMATCH"
            print(f"{status} {kind} {component} {field} expected {value} got {actual}")
            if actual != value:
                sys.exit(1)


main()
