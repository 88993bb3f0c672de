#!/usr/bin/env bash
# The sentence-transformers side of the SciFact side-by-side, in the order it was run
# (issue 57 item 8; docs/notes/retrieval_st_side.md). Resumable: every step writes one JSON
# under benchmarks/results/retrieval/ and is skipped when that JSON exists, so re-running
# this script after a stop finishes what is left. Niced: the machine is shared.
#   bash benchmarks/retrieval/st_side_all.sh              # everything still missing
#   STEPS="mined:1 mined:2" bash benchmarks/retrieval/st_side_all.sh   # some steps only
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
MAIN="$(dirname "$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo "$ROOT/.git")")"
PY="${PEER_PYTHON:-$MAIN/../peer-venv/bin/python}"
[ -x "$PY" ] || { echo "no $PY: run benchmarks/retrieval/peer_venv.sh first"; exit 1; }
ST="$ROOT/benchmarks/retrieval/st_side.py"
cd "$ROOT"
# zero-shot check + the one mining pass (its triplets feed every "mined" seed); timings of
# both recipes (training only: an evaluation costs what the zero-shot one did): one epoch
# of the in-batch recipe, the first 10 steps of the mined one (an epoch did not fit);
# then the seeds, mined first (the anchor of the comparison).
STEPS="${STEPS:-zeroshot timing timing_mined mined:0 inbatch:0 mined:1 inbatch:1 mined:2 inbatch:2}"
for step in $STEPS; do
  case "$step" in
    zeroshot) nice -n 10 "$PY" "$ST" --recipe zeroshot ;;
    timing)   nice -n 10 "$PY" "$ST" --recipe inbatch --seed 0 --epochs 1 --no-eval \
                --tag _timing1ep ;;
    timing_mined) nice -n 10 "$PY" "$ST" --recipe mined --seed 0 --epochs 1 --no-eval \
                --max-steps 10 --tag _timing10steps ;;
    *:*)      nice -n 10 "$PY" "$ST" --recipe "${step%%:*}" --seed "${step##*:}" --epochs 3 ;;
  esac || { echo "step $step failed"; exit 1; }
done
