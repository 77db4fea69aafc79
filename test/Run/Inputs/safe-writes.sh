#!/usr/bin/env bash
# Output targets keep what they are: devices and FIFOs are written in place,
# symlinks lead to their target, a file keeps its mode, an unrelated X.tmp
# survives, and a failed write is one error line with nothing replaced.
# usage: safe-writes.sh BINDIR EXAMPLES WORKDIR
set -euo pipefail
bin=$1 examples=$2 work=$3
rm -rf "$work" && mkdir -p "$work/tmp" "$work/home"
cd "$work"
export TMPDIR=$work/tmp HOME=$work/home
compile() { "$bin/v4a-compile" "$examples/tiny.json" "$@"; }
fail() { echo "FAILED: $*"; exit 1; }

compile -o /dev/null
[ -c /dev/null ] || fail "/dev/null lost its type"
compile -o /dev/stdout | grep -q v4a.model || fail "nothing written to /dev/stdout"
[ -L /dev/stdout ] || fail "/dev/stdout is no longer a symlink"
compile --emit=obj -o /dev/null
[ -c /dev/null ] || fail "/dev/null replaced by --emit=obj"
"$bin/v4a-run" "$examples/tiny.json" --random-weights 1 --prompt-len 3 \
  --decode-steps 1 --outputs /dev/null > /dev/null
[ -c /dev/null ] || fail "/dev/null replaced by --outputs"

echo old > target.mlir
ln -s target.mlir link.mlir
compile -o link.mlir
[ -L link.mlir ] || fail "the symlink was replaced"
grep -q v4a.model target.mlir || fail "the symlink's target was not written"

mkfifo pipe.mlir
cat pipe.mlir > from-pipe.mlir &
compile -o pipe.mlir
wait
[ -p pipe.mlir ] || fail "the FIFO was replaced"
grep -q v4a.model from-pipe.mlir || fail "nothing came through the FIFO"

echo old > private.mlir
chmod 600 private.mlir
compile -o private.mlir
[ "$(stat -c %a private.mlir)" = 600 ] || fail "mode $(stat -c %a private.mlir), expected 600"
echo old > private.o
chmod 640 private.o
echo mine > private.o.tmp
compile --emit=obj -o private.o
[ "$(stat -c %a private.o)" = 640 ] || fail "object mode changed"
[ "$(cat private.o.tmp)" = mine ] || fail "--emit=obj touched private.o.tmp"
grep -q _mlir_ciface_ private.h || fail "no header beside the object"
echo mine > out.safetensors.tmp
"$bin/v4a-run" "$examples/tiny.json" --random-weights 1 --prompt-len 3 \
  --decode-steps 1 --outputs out.safetensors > /dev/null
[ "$(cat out.safetensors.tmp)" = mine ] || fail "--outputs touched out.safetensors.tmp"

# A full device: one error line, exit status 1, no crash banner.
if compile -o /dev/full 2> full.err; then fail "writing /dev/full succeeded"; fi
[ "$(wc -l < full.err)" = 1 ] || { cat full.err; fail "more than one error line"; }
grep -q "v4a-compile: error: /dev/full: cannot write: No space left on device" full.err ||
  { cat full.err; fail "unexpected message"; }
if compile --emit=obj -o /dev/full 2> full-obj.err; then fail "obj to /dev/full"; fi
[ "$(wc -l < full-obj.err)" = 1 ] || { cat full-obj.err; fail "obj: not one line"; }
if "$bin/v4a-run" "$examples/tiny.json" --random-weights 1 --prompt-len 3 \
  --decode-steps 1 --outputs /dev/full > /dev/null 2> run-full.err; then
  fail "--outputs /dev/full succeeded"
fi
[ "$(wc -l < run-full.err)" = 1 ] || { cat run-full.err; fail "run: not one line"; }

# A directory in a file's place is refused and kept.
mkdir adir
if compile -o adir 2> dir.err; then fail "wrote over a directory"; fi
grep -q "adir: is a directory" dir.err || { cat dir.err; fail "directory message"; }
[ -d adir ] || fail "the directory is gone"

# Nothing is left behind in TMPDIR or HOME (no .debug/jit folders) and no
# temporary file stays beside the outputs.
left=$(find "$work/tmp" "$work/home" -mindepth 1)
[ -z "$left" ] || fail "files left behind: $left"
leftovers=$(ls -A | grep '^\.' || true)
[ -z "$leftovers" ] || fail "temporary files left: $leftovers"
echo "safe writes: OK"
