"""Before a device call: move the large tracked files (zoo weights, figures, fixtures) out of
the working tree, so that what the call sends (every tracked file plus the carried paths)
stays under the device's 64 MiB; after the call, put them back.

    python benchmarks/gpu/slim_tree.py out     # tracked files >= 200 kB -> .gpu_stash/ (ignored)
    python benchmarks/gpu/slim_tree.py in      # back where they were
    python benchmarks/gpu/slim_tree.py out --min-bytes 60000   # more room for carried data

``out`` refuses when one of those files has uncommitted changes (commit first) or when
``.gpu_stash/`` already holds files (an earlier ``out`` not put back); ``in`` refuses to
overwrite a file that reappeared in the tree. Both print the tracked size left in the tree.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STASH = os.path.join(ROOT, ".gpu_stash")
LIMIT = 200_000  # bytes: zoo weights, figures, test fixtures (no source file is this large)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


def _tracked() -> list[str]:
    return [p for p in _git("ls-files", "-z").split("\0") if p]


def _tree_bytes() -> int:
    return sum(os.path.getsize(os.path.join(ROOT, p)) for p in _tracked()
               if os.path.isfile(os.path.join(ROOT, p)))


def _stashed() -> list[str]:
    out = []
    for folder, _, files in os.walk(STASH):
        out += [os.path.relpath(os.path.join(folder, f), STASH) for f in files]
    return sorted(out)


def out(min_bytes: int = LIMIT) -> int:
    if min_bytes < 50_000:
        sys.exit(f"--min-bytes {min_bytes}: must be >= 50000 (smaller files are source).")
    if _stashed():
        sys.exit(f"{STASH} already holds {len(_stashed())} files: run `in` first.")
    big = [p for p in _tracked() if os.path.isfile(os.path.join(ROOT, p))
           and os.path.getsize(os.path.join(ROOT, p)) >= min_bytes]
    dirty = _git("status", "--porcelain", "--", *big).strip() if big else ""
    if dirty:
        sys.exit(f"uncommitted changes to large files (commit first):\n{dirty}")
    for path in big:
        dst = os.path.join(STASH, path)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.move(os.path.join(ROOT, path), dst)
    print(f"moved {len(big)} files ({sum(os.path.getsize(os.path.join(STASH, p)) for p in big) / 1e6:.1f} MB) "
          f"to {STASH}; tracked files left in the tree: {_tree_bytes() / 1e6:.1f} MB")
    return 0


def back() -> int:
    files = _stashed()
    clash = [p for p in files if os.path.exists(os.path.join(ROOT, p))]
    if clash:
        sys.exit(f"{len(clash)} stashed files exist in the tree again (e.g. {clash[0]}); "
                 "resolve by hand.")
    for path in files:
        dst = os.path.join(ROOT, path)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.move(os.path.join(STASH, path), dst)
    shutil.rmtree(STASH, ignore_errors=True)
    print(f"restored {len(files)} files; tracked files in the tree: {_tree_bytes() / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["out", "in"])
    p.add_argument("--min-bytes", type=int, default=LIMIT,
                   help=f"`out` moves tracked files of at least this size (default {LIMIT})")
    a = p.parse_args()
    sys.exit(out(a.min_bytes) if a.what == "out" else back())
