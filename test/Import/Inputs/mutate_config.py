"""Writes a variant of a config.json for the error tests.

usage: mutate_config.py BASE OUT [KEY=JSON ...] [--drop KEY] [--nest N]
       [--nest-field N] [--duplicate KEY]
KEY may be dotted (rope_scaling.type). --nest N writes N nested lists as
the whole file; --nest-field N adds them under an unknown field; --duplicate
KEY repeats a top-level key with another value.
"""
import json
import sys


def main():
    base, out, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    config = json.load(open(base))
    extra = ""
    text = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--drop":
            path = args[i + 1].split(".")
            node = config
            for key in path[:-1]:
                node = node[key]
            del node[path[-1]]
            i += 2
            continue
        if arg == "--nest":
            n = int(args[i + 1])
            text = "[" * n + "]" * n
            i += 2
            continue
        if arg == "--nest-field":
            n = int(args[i + 1])
            extra = ', "unknown": ' + "[" * n + "]" * n
            i += 2
            continue
        if arg == "--duplicate":
            key = args[i + 1]
            extra = ", " + json.dumps(key) + ": " + json.dumps(config[key] + 1)
            i += 2
            continue
        key, value = arg.split("=", 1)
        path = key.split(".")
        node = config
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = json.loads(value)
        i += 1
    if text is None:
        text = json.dumps(config, indent=1)
        text = text[: text.rindex("}")] + extra + "}\n"
    open(out, "w").write(text)


main()
