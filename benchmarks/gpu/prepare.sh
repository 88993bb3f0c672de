#!/usr/bin/env bash
# Issue 31: make here, in one command, everything a device call carries. Nothing made here
# outlives a session (each session starts on a fresh checkout: ignored folders are gone), so a
# session that is lent a GPU runs this first, then commits and calls.
#
#   bash benchmarks/gpu/prepare.sh            # for entries_call.sh: train pack + 2k test pack,
#                                             #   wheels keras namex optree
#   bash benchmarks/gpu/prepare.sh parity     # for parity_call.sh: + the 10k test pack, lightly
#
# Then `python benchmarks/gpu/slim_tree.py out` (entries) or `... out --min-bytes 60000`
# (parity) and the call; the script ends by printing what would travel. Each step is skipped
# when its output is already there. Needs ../shared/data/cifar10-jpg and the package
# registry (pip download); ~2 CPU-minutes for the packs on this machine.
set -eu
WHAT=${1:-entries}
case "$WHAT" in entries|parity) ;; *) echo "prepare.sh: WHAT must be entries or parity, got '$WHAT'" >&2; exit 2;; esac
PYTHON=${PYTHON:-python3}
cd "$(git rev-parse --show-toplevel)"

exclude=$(git rev-parse --git-path info/exclude)  # .git is a file in a worktree
mkdir -p "$(dirname "$exclude")"
for ignored in /.whl/ /.gpu_data/; do
  grep -qxF "$ignored" "$exclude" 2>/dev/null || echo "$ignored" >> "$exclude"
done

wheels="keras==3.15.1 namex optree"
[ "$WHAT" = parity ] && wheels="$wheels lightly==1.6.0"
for spec in $wheels; do
  name=${spec%%==*}
  if ! ls .whl/"$name"-*.whl > /dev/null 2>&1; then
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --implementation cp \
      --python-version 3.12 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform any -d .whl "$spec"
  fi
done

if [ ! -f .gpu_data/cifar10_train.npz ] || [ ! -f .gpu_data/cifar10_test2000.npz ]; then
  "$PYTHON" benchmarks/gpu/zoo_train.py pack                        # train + 200 a class
fi
if [ "$WHAT" = parity ] && [ ! -f .gpu_data/cifar10_test10000.npz ]; then
  "$PYTHON" benchmarks/gpu/zoo_train.py pack --skip-train --test-per-class 1000
fi
if [ "$WHAT" = entries ] && [ -f .gpu_data/cifar10_test10000.npz ]; then
  echo "prepare.sh: .gpu_data/cifar10_test10000.npz would push the entries' call over 64 MiB;" \
       "move it out of .gpu_data/ for that call" >&2
fi
ls -l .whl .gpu_data
du -cb .whl .gpu_data | tail -1 | awk '{printf "carried folders: %.1f MB (+ tracked files; limit 67.1 MB)\n", $1/1e6}'
