#!/usr/bin/env bash
# Branches state-chunks (sc-*) and token-pairs (tp-*) against main (main-*):
# outputs bit for bit, memcheck, then Nsight Compute side by side; then the
# sort-barrier / split-cap packages of ../call2 (sb-*, sp*-*).
set -u
cd "$(dirname "$0")"
tar xzf pk.tgz
[ -f ../call2/pk.tgz ] && tar xzf ../call2/pk.tgz -C . 2>/dev/null
RUN=$PWD/v4a-run-package
exec > >(tee "$OUT/call.log") 2>&1
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
t0=$SECONDS
export V4A_FILL_TEMPORARIES=poison
same() { # name A B prompt lengths decode layers
  local args=(--random-weights 1 --prompt-len $4 --lengths $5 --decode-steps $6)
  [[ -n $7 ]] && args+=(--layers $7)
  timeout 120 $RUN pk/$2.v4apkg "${args[@]}" --outputs /tmp/a.st > /tmp/a.log 2>&1 || echo "$1: $2 failed: $(tail -2 /tmp/a.log)"
  timeout 120 $RUN pk/$3.v4apkg "${args[@]}" --outputs /tmp/b.st > /tmp/b.log 2>&1 || echo "$1: $3 failed: $(tail -2 /tmp/b.log)"
  if cmp -s /tmp/a.st /tmp/b.st; then echo "$1: $2 = $3 bitwise: PASS"; else echo "$1: $2 vs $3 differ: FAIL"; fi
  rm -f /tmp/a.st /tmp/b.st; echo "  ($((SECONDS - t0)) s)"
}
same sc-3000 main-64k sc-64k 3000 3000,1700,1 2 0,2,3
same sc-odd main-64k sc-64k 3001 3001,1698 2 0,2,3
same tp-3000 main-64k tp-64k 3000 3000,1700,1 2 0,2,3
same tp-odd main-64k tp-64k 3001 3001,1698 2 2
same tp-9000 main-64k tp-64k 9000 9000,5000,1,1,1,1,7000 2 2
same tp-pro main-pro tp-pro 2000 2000,1300,1 2 2
same tp-v41 main-v41 tp-v41 3000 3000,1000,1 2 2,20,30
timeout 150 compute-sanitizer --tool memcheck --print-limit 10 $RUN pk/tp-64k.v4apkg --random-weights 1 --prompt-len 3001 --lengths 3001,1698 --decode-steps 1 --layers 2 > /tmp/mc.txt 2>&1; tail -1 /tmp/mc.txt | sed 's/^/memcheck tp: /'
timeout 150 compute-sanitizer --tool memcheck --print-limit 10 $RUN pk/sc-64k.v4apkg --random-weights 1 --prompt-len 3001 --lengths 3001,1698 --decode-steps 1 --layers 0,2,3 > /tmp/mc.txt 2>&1; tail -1 /tmp/mc.txt | sed 's/^/memcheck sc: /'
echo "validation done ($((SECONDS - t0)) s)"
prof() { # label regex pkgA pkgB layers batch context tokens
  for side in $3 $4; do
    timeout 150 ncu --clock-control none --kernel-name regex:"$2" --metrics gpu__time_duration.sum --csv --print-units base \
      $RUN pk/$side.v4apkg --random-weights 1 --layers $5 --bench --batch $6 --context $7 --tokens $8 --repeat 1 --graphs off 2>/dev/null \
      | grep gpu__time_duration > /tmp/ncu.csv
    python3 - /tmp/ncu.csv "$1 $side" <<'PY'
import collections, csv, sys
per = collections.defaultdict(list)
for row in csv.reader(open(sys.argv[1])):
    per[row[4]].append(float(row[-1].replace(',', '')) / 1e3)
print(sys.argv[2] + ": " + ", ".join(f"{k.split('_', 1)[-1]} {min(v):.1f}-{max(v):.1f}" for k, v in sorted(per.items())) + " us")
PY
  done
}
prof prefill8k-loops-rows 'loops|rows' main-64k sc-64k 0,2,3 1 0 8192
prof decode128-loops-rows 'loops|rows' main-64k sc-64k 0,2,3 128 65536 1
prof prefill8k-indexer 'indexer' main-64k tp-64k 2 1 0 8192
prof decode2048-indexer 'indexer' main-64k tp-64k 2 2048 4096 1
prof pro-prefill4k-indexer 'indexer' main-pro tp-pro 2 1 0 4096
echo "($((SECONDS - t0)) s)"
if [ -f pk/sb-1m.v4apkg ]; then
  prof 1x1m-sort-barrier 'indexer' main-1m sb-1m 2 1 1048576 1
  for c in sp132 sp198 sp396; do prof 1x1m-$c 'indexer' sb-1m $c-1m 2 1 1048576 1; done
fi
echo "all done ($((SECONDS - t0)) s)"
