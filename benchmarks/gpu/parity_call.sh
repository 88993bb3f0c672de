#!/usr/bin/env bash
# Issue 31's rule while issue 32 (recipe parity) is open: one device call settles parity at
# full scale -- the whole 50k CIFAR-10 JPEG set, ResNet-18 width 64, batch 512, bf16, the
# same shortened cosine schedule (E epochs), kNN k 200 t 0.1 with the 50k bank on the 10k test
# -- three runs at once on one GPU:
#   ours_recipe       the zoo recipe (models/simclr-ntxent-cifar10/recipe.json), JAX
#   ours_all_lightly  the same with every known difference from lightly as recipe keys
#                     (benchmarks/parity/keras_side.py's `all_lightly` variant)
#   lightly           lightly 1.6's SimCLR CIFAR-10 recipe in torch (benchmarks/parity/lightly_side.py)
# Both sides also score KNNMonitor's seeded subset (10k bank / 2k queries) every 10 epochs,
# so their curves compare epoch by epoch. Logs and results go to $OUT (at most 8 files).
#
# Here, first (docs/notes/gpu_zoo.md):
#   bash benchmarks/gpu/prepare.sh parity   # .gpu_data/ with the 10k test pack; .whl/ with lightly
#   python benchmarks/gpu/slim_tree.py out --min-bytes 60000
# Device call (carry .whl and .gpu_data; timeout_s 600):
#   bash benchmarks/gpu/parity_call.sh
# After: python benchmarks/gpu/slim_tree.py in; results into benchmarks/results/gpu/.
#
# METHOD=moco (issue 31, item 2: the MoCo entries' recipe question, docs/notes/gpu_zoo.md)
# runs MoCo v2 instead, from models/moco_v2-ntxent-cifar10/recipe.json with lightly's MoCo
# benchmark settings as keys (MOCO_LIGHTLY below), queue BANK (8192, lightly's at batch 512):
#   ours_symmetric    those keys, both view orders (framework.symmetric)
#   ours_one_order    the same, one order (the MoCo v2 paper's step)
#   lightly           lightly's MocoModel (lightly_side.py --method moco: split BN, shuffled keys)
# What ours cannot say (and so still differs): the 8-way split batch norm and the key
# shuffle, torch's default initialisation, lightly's stem without a ReLU.
# Environment knobs (defaults for one 10-minute call): METHOD, BANK, E, OURS_MINUTES, LIGHTLY_MINUTES,
# SEED (both sides), NO_LIGHTLY (ours only), WORKERS, TRAIN_PACK, TEST_PACK, PYTHON, LIGHTLY_PYTHON, EXTRA, LIGHTLY_EXTRA.
set -u
E=${E:-80}
OURS_MINUTES=${OURS_MINUTES:-8.9}
LIGHTLY_MINUTES=${LIGHTLY_MINUTES:-8.0}
WORKERS=${WORKERS:-12}
TRAIN_PACK=${TRAIN_PACK:-.gpu_data/cifar10_train.npz}
TEST_PACK=${TEST_PACK:-.gpu_data/cifar10_test10000.npz}
PYTHON=${PYTHON:-python3}
LIGHTLY_PYTHON=${LIGHTLY_PYTHON:-$PYTHON}
OUT=${OUT:?set OUT to the results folder}
WORK=${WORK:-/tmp/khn_parity}
EXTRA=${EXTRA:-}   # extra arguments for both zoo_train runs (CPU smoke test: --width 4 ...)
LIGHTLY_EXTRA=${LIGHTLY_EXTRA:-}

. benchmarks/gpu/device_env.sh
mkdir -p "$OUT" "$WORK"
(nvidia-smi; nproc; date -u) > "$OUT/hardware.txt" 2>&1

# keras_side.py's all_lightly keys (torch init, per-view batch norm, symmetric stride-2
# padding, torchvision's jitter, grey contrast mean, whole-pixel crops, per-epoch cosine).
ALL_LIGHTLY='{"encoder": {"conv_init": "he_normal_fan_out", "padding": "symmetric"}, "framework": {"head_init": "torch_linear", "batch_norm_views": "per_view"}, "augmentation": {"exact_color_jitter": true, "contrast_mean": "gray", "crop_boxes": "integer"}, "schedule": {"per_epoch": true}}'

ours() {  # NAME [zoo_train arguments...]
  local name=$1; shift
  XLA_PYTHON_CLIENT_MEM_FRACTION=${MEM_FRACTION:-0.3} timeout 570 $PYTHON \
    benchmarks/gpu/zoo_train.py train --entry "$ENTRY" --epochs "$E" \
    --minutes "$OURS_MINUTES" --reserve-seconds 25 --export-partial --fresh \
    --train-pack "$TRAIN_PACK" --test-pack "$TEST_PACK" --run-dir "$WORK/run_$name" \
    --out "$WORK/out_$name" $EXTRA "$@" > "$OUT/ours_$name.log" 2>&1
  echo "ours_$name exit $?" >> "$OUT/hardware.txt"
}
SEED=${SEED:-0}
METHOD=${METHOD:-simclr}
BANK=${BANK:-8192}
if [ "$METHOD" = moco ]; then
  ENTRY=moco_v2-ntxent-cifar10
  MOCO_LIGHTLY='{"framework": {"queue_size": '$BANK', "momentum": 0.99, "symmetric": SYM}, "loss": {"temperature": 0.1}, "projection_dims": [512, 128], "optimizer": {"name": "sgd_l2", "learning_rate": 0.24, "momentum": 0.9, "weight_decay": 0.0005}, "schedule": {"warmup_epochs": 0, "per_epoch": true}, "augmentation": {"version": "v2", "strength": 1.0, "crop_scale": [0.08, 1.0], "exact_color_jitter": true, "contrast_mean": "gray", "crop_boxes": "integer"}, "encoder": {"conv_init": "he_normal_fan_out", "padding": "symmetric"}, "seed": '$SEED'}'
  RUNS="symmetric one_order"
  ours symmetric --override "${MOCO_LIGHTLY/SYM/true}" &
  ours one_order --override "${MOCO_LIGHTLY/SYM/false}" &
  LIGHTLY_METHOD="--method moco --bank $BANK"
else
  ENTRY=simclr-ntxent-cifar10
  ALL_LIGHTLY="${ALL_LIGHTLY%\}}, \"seed\": $SEED}"
  RUNS="recipe all_lightly"
  ours recipe --override "{\"seed\": $SEED}" &
  ours all_lightly --override "$ALL_LIGHTLY" &
  LIGHTLY_METHOD=""
fi
[ -n "${NO_LIGHTLY:-}" ] || (XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 570 $LIGHTLY_PYTHON benchmarks/parity/lightly_side.py $LIGHTLY_METHOD \
   --train-pack "$TRAIN_PACK" --test-pack "$TEST_PACK" --device "${LIGHTLY_DEVICE:-cuda}" \
   --workers "$WORKERS" --precision bf16 --width 64 --batch-size 512 --epochs "$E" \
   --eval-every 10 --minutes "$LIGHTLY_MINUTES" --score --seed "$SEED" --monitor-seed "$SEED" --out "$OUT/lightly" \
   $LIGHTLY_EXTRA > "$OUT/lightly.log" 2>&1; echo "lightly exit $?" >> "$OUT/hardware.txt") &
wait
# Everything of ours but the float16 weights (not an entry: a shortened schedule).
outs=""
for name in $RUNS; do
  cp "$WORK/run_$name/invocations.json" "$WORK/out_$name/" 2>/dev/null
  outs="$outs out_$name"
done
tar -czf "$OUT/ours_results.tgz" -C "$WORK" --exclude='*.weights-*' $outs
date -u >> "$OUT/hardware.txt"
