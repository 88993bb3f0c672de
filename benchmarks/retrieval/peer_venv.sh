#!/usr/bin/env bash
# The benchmark-only virtualenv for the sentence-transformers side of the SciFact
# side-by-side (issue 57 item 8). It lives OUTSIDE the repository, at ../peer-venv beside
# the MAIN checkout (/work/peer-venv here, also from a git worktree of it: the path that
# benchmarks/parity/*.py use), and neither the package nor its tests import it.
# Idempotent: re-running only installs what is missing.
#   bash benchmarks/retrieval/peer_venv.sh            # creates / completes the venv
#   PEER_VENV=/some/where bash benchmarks/retrieval/peer_venv.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
MAIN="$(dirname "$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo "$ROOT/.git")")"
VENV="${PEER_VENV:-$MAIN/../peer-venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PY="$VENV/bin/python"
# torch first, pinned to the CPU build that lies on this machine's disk (pip finds the
# file; a bare `torch` would pull a multi-GB CUDA build).
"$PY" -m pip install -q torch==2.13.0
# sentence-transformers 6.2.0 with its training extra (datasets, accelerate: the
# SentenceTransformerTrainer and util.mine_hard_negatives need them). torch is already
# satisfied by 2.13.0, so nothing larger is pulled.
"$PY" -m pip install -q "sentence-transformers[train]==6.2.0" "torch==2.13.0"
"$PY" - <<'PY'
import importlib.metadata as m
for p in ("torch", "sentence-transformers", "transformers", "tokenizers",
          "huggingface-hub", "datasets", "accelerate", "numpy"):
    try:
        print(f"{p}=={m.version(p)}")
    except m.PackageNotFoundError:
        print(f"{p}: not installed")
PY
