#!/usr/bin/env bash
# Issue 31: zoo entries trained on one lent GPU, two at once (1.25x the throughput of one),
# each by `benchmarks/gpu/zoo_train.py train` on its zoo recipe (models/ENTRY/recipe.json,
# batch 512, 200 epochs, mixed_bfloat16, JAX), resumable across calls: the resume state lives
# in /tmp/keras_hardneg_gpu_runs/ENTRY, which survives between calls on a warm machine.
#
# Here, first (docs/notes/gpu_zoo.md, "The next GPU session"):
#   bash benchmarks/gpu/prepare.sh   # .gpu_data/: train 47.2 MB + test2000; .whl/: keras namex optree
#   python benchmarks/gpu/slim_tree.py out
# Device call 1 (carry .whl and .gpu_data; timeout_s 600):
#   bash benchmarks/gpu/entries_call.sh                    # ~165 of 200 epochs each
# Device call 2, at once (the machine stays warm 30 s; carry the same):
#   MINUTES=3 bash benchmarks/gpu/entries_call.sh          # resumes, finishes, exports
# After: python benchmarks/gpu/slim_tree.py in; copy the fetched folder (read-only) to DIR,
# `tar xzf DIR/logs.tgz -C DIR` (logs/ and each ENTRY/'s epochs.jsonl and run.json beside its
# float16 weight parts), then for each entry
#   python benchmarks/gpu/zoo_import.py --entry ENTRY --from DIR/ENTRY
# At most 8 files come back: two entries give 5 (2 weight parts each + logs.tgz).
# Environment knobs: ENTRIES, MINUTES, MEM_FRACTION, PYTHON, EXTRA (more zoo_train
# arguments, e.g. the CPU smoke test's packs and width).
set -u
ENTRIES=${ENTRIES:-"simclr-ntxent-cifar10 simclr-hard-cifar10"}
MINUTES=${MINUTES:-9.2}
PYTHON=${PYTHON:-python3}
OUT=${OUT:?set OUT to the results folder}
EXTRA=${EXTRA:-}

. benchmarks/gpu/device_env.sh
mkdir -p "$OUT/logs"
(nvidia-smi; nproc; date -u) > "$OUT/logs/hardware.txt" 2>&1
for entry in $ENTRIES; do
  (XLA_PYTHON_CLIENT_MEM_FRACTION=${MEM_FRACTION:-0.45} $PYTHON benchmarks/gpu/zoo_train.py \
     train --entry "$entry" --minutes "$MINUTES" --reserve-seconds 20 --export-partial \
     --out "$OUT/$entry" $EXTRA > "$OUT/logs/$entry.log" 2>&1
   echo "$entry exit $?" >> "$OUT/logs/hardware.txt") &
done
wait
date -u >> "$OUT/logs/hardware.txt"
# The weights stay as files ($OUT/ENTRY/*.weights-*); everything else goes into one file,
# under the same ENTRY/ paths, so that untarring it beside the weights completes each folder.
small=$(cd "$OUT" && ls -d logs */*.epochs.jsonl */*.run.json 2>/dev/null)
tar -czf "$OUT/logs.tgz" -C "$OUT" $small && (cd "$OUT" && rm -rf $small)
