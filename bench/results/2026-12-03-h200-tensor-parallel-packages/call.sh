#!/usr/bin/env bash
# The call that produced call.log. Its packages: v4a-compile CONFIG --context N --target=sm_90a [--tensor-parallel K] -o build/gpu/NAME.v4apkg for examples/v4-flash.json and v4-pro.json at 4096 (K 1, 2), v4-pro.json at 65792 (K 1, 2), the refdata configs at 1024 (bf16 set K 1, 2, 4; fp8 set K 1, 2).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu
exec > >(tee "$OUT/call3.log") 2>&1
T0=$SECONDS
sec() { echo "=== $1 (t=$((SECONDS-T0))s)"; }
run=build/bin/v4a-run-package
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
sec "ranks summed vs the whole model's reference (--check)"
check() { # name pkg prompt lengths decode layers
  timeout 120 $run "$dir/$2.v4apkg" --random-weights 7 --prompt-len "$3" \
    --lengths "$4" --decode-steps "$5" --check --tolerance 0.05 --layers "$6" 2>&1 | sed -u "s/^/$1: /" || echo "$1: FAIL (exit/timeout)"
}
check flash-tp2 v4-flash-tp2 40 40,9 1 0,2,3
check flash-tp2-bnd v4-flash-tp2 260 260,129,1 2 2,3
check pro-tp2 v4-pro-tp2 20 20,3 1 0,2
sec "ranks summed vs the unsharded package (bf16 ulps of each output's largest value)"
both() { # name pkgA pkgB prompt lengths decode layers
  local a=/tmp/$1-a.st b=/tmp/$1-b.st
  timeout 100 $run $dir/$2.v4apkg --random-weights 7 --prompt-len $4 --lengths $5 --decode-steps $6 --layers $7 --outputs $a >/dev/null &&
  timeout 100 $run $dir/$3.v4apkg --random-weights 7 --prompt-len $4 --lengths $5 --decode-steps $6 --layers $7 --outputs $b >/dev/null &&
  python3 $dir/within_ulps.py $a $b 2 $dir/refdata | sed "s/^/$1: /" || echo "$1: FAIL"
}
both flash-tp2-vs-1 v4-flash v4-flash-tp2 40 40,9 2 0,2,3
both pro-tp2-vs-1 v4-pro v4-pro-tp2 20 20,3 2 0,2
sec "refdata: compare.py and ulps against the unsharded package"
refd() { # name pkg folder out
  timeout 100 $run $dir/$2.v4apkg --weights $3/weights.safetensors --inputs $3/inputs.safetensors --outputs $4 >/dev/null &&
  python3 $dir/refdata/compare.py $3/ref_outputs.safetensors $4 $3/config.json | sed "s/^/$1: /" || echo "$1: FAIL"
}
refd rd-1 refdata-bf16 $dir/refdata /tmp/rd1.st
refd rd-tp2 refdata-tp2 $dir/refdata /tmp/rd2.st
refd rd-tp4 refdata-tp4 $dir/refdata /tmp/rd4.st
python3 $dir/within_ulps.py /tmp/rd1.st /tmp/rd2.st 2 $dir/refdata | sed "s/^/rd tp2 vs 1: /"
python3 $dir/within_ulps.py /tmp/rd1.st /tmp/rd4.st 2 $dir/refdata | sed "s/^/rd tp4 vs 1: /"
refd rdf8-1 refdata-fp8 $dir/refdata/fp8 /tmp/rf1.st
refd rdf8-tp2 refdata-fp8-tp2 $dir/refdata/fp8 /tmp/rf2.st
python3 $dir/within_ulps.py /tmp/rf1.st /tmp/rf2.st 2 $dir/refdata | sed "s/^/rdf8 tp2 vs 1: /"
sec "V4-Pro layer 2 decode at 64K: the whole layer vs one rank of two"
for round in 1 2; do
  for b in 128 32; do
    timeout 100 $run $dir/v4-pro-64k.v4apkg --random-weights 1 --layers 2 --bench --batch $b --context 65536 --tokens 1 --repeat 20 --graphs on | sed -u "s/^/r$round whole: /"
    timeout 100 $run $dir/v4-pro-64k-tp2.v4apkg --random-weights 1 --layers 2 --bench --batch $b --context 65536 --tokens 1 --repeat 20 --graphs on --tensor-rank 0 | sed -u "s/^/r$round rank0of2: /"
  done
done
sec done
