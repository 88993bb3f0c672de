"""GPU-side training driver for a zoo entry (issue 18): ResNet-18 (CIFAR stem, width 64) on
CIFAR-10 under ``KERAS_BACKEND=jax``, ``mixed_bfloat16``, batch 512, augmentation inside the
compiled step, resumable across invocations of at most ``--minutes`` wall minutes.

Two sub-commands (run from the repository root):

``pack``: the CIFAR-10 JPEG bytes for the GPU machine (which cannot read ``../shared``), made
by calling ``pack_cifar.pack`` on folders of links to the chosen files, each pack with a
``position`` array (the file's index in its class's sorted list) so that shards and subsets
load back in the image folder's order::

    python benchmarks/gpu/zoo_train.py pack                  # .gpu_data/cifar10_train.npz
        # (46.8 MB) + .gpu_data/cifar10_test2000.npz (200 spread test images per class, ~2 MB)
    python benchmarks/gpu/zoo_train.py pack --shards 3       # cifar10_train.s0of3.npz, ...
        # (every 3rd file of each class per shard) when the tree + carry would pass 64 MiB

``train``: one invocation of at most ``--minutes`` (default 9) wall minutes. It trains with
:func:`keras_hardneg.run.train` (the library's one run path: the recipe, the in-step
augmentation, the kNN monitor, the sampler's refresh, ``AtomicBackupAndRestore`` in
``RUN_DIR/backup``), stops at the end of the last epoch that fits in the budget, and the
next invocation resumes from the backup (a killed invocation resumes from its last finished
epoch). Per epoch it appends a JSON line to ``RUN_DIR/epochs.jsonl`` (loss, kNN monitor on a
fixed subset -- 10,000 train / the test pack -- seconds, images/s, hardware). When the target
epochs are reached it writes into ``--out``: the encoder's weights as float16 ``.npz`` parts
of at most 15 MB (``ENTRY.weights-1-of-2.npz``, ...), ``ENTRY.epochs.jsonl`` and
``ENTRY.run.json`` (recipe, what differs from the zoo recipe, commands, hardware, minutes)::

    KERAS_BACKEND=jax python benchmarks/gpu/zoo_train.py train --entry simclr-ntxent-cifar10 \\
        --out $OUT        # resume state in /tmp/keras_hardneg_gpu_runs/ENTRY

The recipe is ``models/ENTRY/recipe.json`` with only what the GPU plan changes overridden:
``batch_size`` 512, ``epochs`` 200, ``precision`` mixed_bfloat16, and
``evaluation.linear_probe`` off (the probe is fitted on the CPU by ``zoo_import.py``);
``--width``, ``--override JSON`` change more (recorded). The weights go back to a CPU with
``zoo_import.py``. Plan, device commands and budgets: ``docs/notes/gpu_zoo.md``.

Tiny CPU check (a few seconds of training)::

    python benchmarks/gpu/zoo_train.py pack --dest /tmp/zp --train-limit 8 --test-per-class 4
    KERAS_BACKEND=jax python benchmarks/gpu/zoo_train.py train --entry simclr-hard-cifar10 \\
        --train-pack /tmp/zp/cifar10_train.npz --test-pack /tmp/zp/cifar10_test40.npz \\
        --run-dir /tmp/zr --out /tmp/zo --width 4 --batch-size 16 --epochs 2 --minutes 0
    # (--minutes 0: one epoch per invocation; run it twice: the second resumes and finishes)
"""

from __future__ import annotations

import argparse
import copy
import datetime
import glob
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

START = time.perf_counter()

#: The issue's entries, in the order to train them.
ENTRIES = ("simclr-ntxent-cifar10", "simclr-hard-cifar10", "simclr-hard-batchsampler-cifar10",
           "simclr-debiased-cifar10", "simclr-unremix-cifar10", "moco_v2-ntxent-cifar10",
           "moco_v2-ring-cifar10")
#: What the GPU plan changes in every entry's zoo recipe.
GPU_PLAN = {"batch_size": 512, "epochs": 200, "precision": "mixed_bfloat16"}
MAX_PART_BYTES = 15_000_000  # float16 weight files: at most 15 MB each ($OUT takes 16 MiB)
SOURCE = os.path.join(ROOT, "..", "shared", "data", "cifar10-jpg")
#: Resume state lives outside the repository: the device tool re-lays the working tree on
#: every call and removes ignored folders in it that the call does not carry (measured
#: 2026-11-26: ``.gpu_runs/`` was gone on the next call of the same warm machine, while
#: ``/tmp`` was kept), so a run dir inside the checkout cannot resume across calls.
RUN_ROOT = os.path.join(tempfile.gettempdir(), "keras_hardneg_gpu_runs")


# ------------------------------------------------------------------------------ packing
def _choose(count: int, limit: int | None, spread: int | None, shard: int, shards: int):
    """Positions (indices into a class's sorted file list) a pack takes."""
    positions = np.arange(count)
    if limit is not None:
        positions = positions[:limit]  # the first files, as image_folder's limit_per_class
    if spread is not None and spread < len(positions):
        positions = positions[np.unique(np.linspace(0, len(positions) - 1, spread).round()
                                        .astype(np.int64))]
    return positions[shard::shards]


def pack_subset(folder: str, output: str, *, limit: int | None = None,
                spread: int | None = None, shard: int = 0, shards: int = 1) -> int:
    """Packs the chosen files of each class of ``folder`` with ``pack_cifar.pack`` (through
    a temporary folder of links) and adds ``position`` (int64 ``[n]``: each image's index in
    its class's sorted file list). Returns the number of images."""
    from pack_cifar import pack

    if not output.endswith(".npz"):
        raise ValueError(f"`output` must end with .npz; got {output!r}.")
    if not 0 <= shard < shards:
        raise ValueError(f"`shard` must be in [0, {shards}); got {shard}.")
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    if not classes:
        raise ValueError(f"`folder` {folder!r} has no class subfolders.")
    positions = []
    with tempfile.TemporaryDirectory(prefix="zoo-pack-") as tmp:
        for name in classes:
            files = sorted(os.listdir(os.path.join(folder, name)))
            os.makedirs(os.path.join(tmp, name))
            chosen = _choose(len(files), limit, spread, shard, shards)
            for p in chosen:
                os.symlink(os.path.abspath(os.path.join(folder, name, files[p])),
                           os.path.join(tmp, name, files[p]))
            positions.append(chosen)
        n = pack(tmp, output)
    with np.load(output) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["position"] = np.concatenate(positions).astype(np.int64)
    assert len(arrays["position"]) == n == len(arrays["labels"])
    part = output[:-4] + ".tmp.npz"
    np.savez(part, **arrays)
    os.replace(part, output)
    return n


def load_packs(paths, image_size: int = 32, threads: int | None = None):
    """``(images uint8 [n, S, S, 3], labels int64 [n], skipped)`` of one or more packs
    (shards in any order), decoded by the library's one image decoder and put in the image
    folder's order (label, then file). Undecodable images are skipped and counted."""
    from concurrent.futures import ThreadPoolExecutor

    from keras_hardneg.data.decode import ImageDecodeError, decode_image

    if isinstance(paths, str):
        paths = [paths]
    if not paths:
        raise ValueError("no pack given.")
    blobs, labels, positions = [], [], []
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"pack not found: {path} (make it with "
                                    "`python benchmarks/gpu/zoo_train.py pack`)")
        with np.load(path) as z:
            data, offsets, lab = z["jpeg"], z["offsets"], z["labels"]
            if "position" in z.files:
                pos = z["position"]
            else:  # a plain pack_cifar pack: already in folder order
                pos = np.zeros(len(lab), np.int64)
                for c in np.unique(lab):
                    pos[lab == c] = np.arange(int((lab == c).sum()))
        blobs += [data[offsets[i]:offsets[i + 1]].tobytes() for i in range(len(lab))]
        labels.append(lab.astype(np.int64))
        positions.append(pos.astype(np.int64))
    labels, positions = np.concatenate(labels), np.concatenate(positions)
    key = labels * (int(positions.max()) + 1) + positions
    if len(np.unique(key)) != len(key):
        raise ValueError(f"packs {paths} overlap (the same image twice): give disjoint shards.")
    size = (image_size, image_size)

    def one(blob):
        try:
            return decode_image(blob, image_size=size)
        except ImageDecodeError:
            return None

    with ThreadPoolExecutor(threads or os.cpu_count() or 1) as pool:
        images = list(pool.map(one, blobs, chunksize=256))
    ok = np.array([im is not None for im in images])
    order = np.lexsort((positions, labels))
    order = order[ok[order]]
    x = np.stack([images[i] for i in order]) if len(order) else np.zeros((0, *size, 3), np.uint8)
    return x, labels[order], int((~ok).sum())


def _pack_main(a):
    if a.skip_train and not a.test_per_class:
        raise SystemExit("pack: --skip-train needs --test-per-class > 0 (nothing to pack)")
    os.makedirs(a.dest, exist_ok=True)
    made = []
    train = os.path.join(a.source, "train")
    stem = "cifar10_train" if a.train_limit is None else f"cifar10_train{a.train_limit}pc"
    for k in range(0 if a.skip_train else a.shards):
        name = f"{stem}.npz" if a.shards == 1 else f"{stem}.s{k}of{a.shards}.npz"
        made.append(os.path.join(a.dest, name))
        pack_subset(train, made[-1], limit=a.train_limit, shard=k, shards=a.shards)
    if a.test_per_class:
        test = os.path.join(a.source, "test")
        classes = [d for d in os.listdir(test) if os.path.isdir(os.path.join(test, d))]
        made.append(os.path.join(a.dest, f"cifar10_test{a.test_per_class * len(classes)}.npz"))
        pack_subset(test, made[-1], spread=a.test_per_class)
    for path in made:
        with np.load(path) as z:
            n = len(z["labels"])
        print(f"{path}: {n} images, {os.path.getsize(path) / 1e6:.1f} MB")


# ----------------------------------------------------------------------------- recipes
def _flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def recipe_diff(before: dict, after: dict) -> dict:
    """``{"dotted.key": [before, after]}`` of the keys that differ."""
    a, b = _flatten(before), _flatten(after)
    return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def _deep_merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) \
            else copy.deepcopy(v)
    return out


def gpu_recipe(entry: str, models_dir: str, *, batch_size: int, epochs: int, precision: str,
               width: int | None = None, override: dict | None = None):
    """``(zoo recipe, GPU recipe, differences)``: ``models_dir/entry/recipe.json`` with the GPU
    plan's changes (and ``width``/``override``), checked by the registries."""
    from keras_hardneg.run import load_recipe

    path = os.path.join(models_dir, entry, "recipe.json")
    if not os.path.isfile(path):
        have = sorted(e for e in os.listdir(models_dir)
                      if os.path.isfile(os.path.join(models_dir, e, "recipe.json"))
                      and "cifar10" in e)
        raise SystemExit(f"--entry {entry!r}: no {path}; CIFAR-10 entries with a recipe: "
                         f"{', '.join(have)}")
    zoo = load_recipe(path)
    changes = {"batch_size": batch_size, "epochs": epochs, "precision": precision,
               "evaluation": {"linear_probe": False}}
    if width is not None:
        changes["encoder"] = {"width": width}
    changes = _deep_merge(changes, override or {})
    recipe = load_recipe(zoo, changes)
    return zoo, recipe, recipe_diff(zoo, recipe)


# ---------------------------------------------------------------------------- training
def hardware() -> str:
    import keras

    parts = [f"keras {keras.__version__} backend {keras.backend.backend()}"]
    if keras.backend.backend() == "jax":
        import jax

        devs = jax.devices()
        parts.insert(0, f"{len(devs)} x {devs[0].device_kind} ({devs[0].platform})")
        parts.append(f"jax {jax.__version__}")
    parts.append(f"{os.cpu_count()} CPU cores, {platform.machine()}")
    return "; ".join(parts)


def _read_jsonl(path):
    if not os.path.isfile(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:  # a line cut by a kill
                    pass
    return out


def _write_jsonl(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def make_callbacks(run_dir, deadline, reserve_seconds, batch_size, hw, invocation):
    """``(WallClockBudget, EpochLog)`` Keras callbacks (built here so that keras is imported
    after the backend is chosen)."""
    import keras

    class WallClockBudget(keras.callbacks.Callback):
        """Stops ``fit`` at the end of an epoch when the next one would end after
        ``deadline`` (a ``time.perf_counter`` value) minus ``reserve_seconds``; at least one
        epoch runs per invocation."""

        def __init__(self):
            super().__init__()
            self.durations, self.stopped = [], False

        def on_epoch_begin(self, epoch, logs=None):
            self._t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            now = time.perf_counter()
            self.durations.append(now - self._t0)
            steady = self.durations[1:] or self.durations  # the first one compiles
            if now + 1.15 * max(steady[-3:]) + reserve_seconds > deadline:
                self.model.stop_training = True
                self.stopped = True

    class EpochLog(keras.callbacks.Callback):
        """One JSON line per finished epoch in ``RUN_DIR/epochs.jsonl`` (``epoch`` counts
        from 1); lines of epochs not in the backup (a killed invocation's) are dropped when
        training resumes."""

        def __init__(self):
            super().__init__()
            self.path = os.path.join(run_dir, "epochs.jsonl")
            self._first = True

        def on_epoch_begin(self, epoch, logs=None):
            if self._first:  # epoch = epochs already done (restored from the backup)
                _write_jsonl(self.path, [r for r in _read_jsonl(self.path)
                                         if r.get("epoch", 0) <= epoch])
                self._first = False
            self._t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            logs = dict(logs or {})
            seconds = time.perf_counter() - self._t0
            steps = self.params.get("steps") or 0
            train_s = float(logs.pop("epoch_seconds", seconds))
            row = {"epoch": epoch + 1, "loss": float(logs.pop("loss", float("nan"))),
                   "knn_monitor": (float(logs.pop("knn_accuracy"))
                                   if "knn_accuracy" in logs else None),
                   "train_seconds": round(train_s, 3), "epoch_seconds": round(seconds, 3),
                   "images_per_second": (round(steps * batch_size / train_s, 1)
                                         if train_s > 0 else None),
                   "learning_rate": _current_lr(self.model)}
            for k, v in logs.items():
                try:
                    row[k] = float(v)
                except (TypeError, ValueError):
                    pass
            row.update(invocation=invocation, hardware=hw,
                       time=datetime.datetime.now(datetime.timezone.utc).isoformat(
                           timespec="seconds"))
            with open(self.path, "a") as f:
                f.write(json.dumps(row) + "\n")
                f.flush()
                os.fsync(f.fileno())
            knn = "-" if row["knn_monitor"] is None else f"{row['knn_monitor']:.4f}"
            print(f"epoch {epoch + 1}/{self.params.get('epochs')} loss {row['loss']:.4f} "
                  f"knn {knn} {train_s:.1f}s ({row['images_per_second']} img/s) "
                  f"+{seconds - train_s:.1f}s", flush=True)

    return WallClockBudget(), EpochLog()


def _current_lr(model):
    try:
        import keras

        return float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
    except Exception:  # noqa: BLE001 -- informative only
        return None


def epoch_log(run_dir: str) -> list[dict]:
    """The per-epoch log of a run: ``epochs.jsonl``, with any epoch committed to the backup
    but missing there (an invocation killed between the two writes) filled in from the
    backup's history (``"recovered": true``)."""
    rows = {r["epoch"]: r for r in _read_jsonl(os.path.join(run_dir, "epochs.jsonl"))}
    meta = os.path.join(run_dir, "backup", "training_metadata.json")
    history = []
    if os.path.isfile(meta):
        with open(meta) as f:
            history = json.load(f).get("history", [])
    for i, logs in enumerate(history):
        if i + 1 not in rows:
            rows[i + 1] = {"epoch": i + 1, "loss": logs.get("loss"),
                           "knn_monitor": logs.get("knn_accuracy"),
                           "train_seconds": logs.get("epoch_seconds"), "recovered": True}
    done = len(history) if history else max(rows, default=0)
    return [rows[e] for e in sorted(rows) if e <= done]


def save_float16_weights(encoder, out_dir: str, entry: str, meta: dict,
                         max_part_bytes: int = MAX_PART_BYTES) -> list[str]:
    """Writes ``encoder``'s weights (all of them: kernels, BN statistics) as float16 ``.npz``
    parts of at most ``max_part_bytes`` of array data each (zip and ``.npy`` headers add
    < 64 kB), keyed by variable path, each part carrying ``__meta__`` (UTF-8 JSON bytes:
    all paths in order, shapes, part index, ``meta``). Returns the file names. Raises
    ``ValueError`` if a value does not fit float16."""
    import keras

    arrays, paths, worst = [], [], 0.0
    for v in encoder.weights:
        value = np.asarray(keras.ops.convert_to_numpy(v), dtype=np.float32)
        if not np.all(np.isfinite(value)):
            raise ValueError(f"weight {v.path} is not finite; nothing written.")
        if np.abs(value).max(initial=0.0) > np.finfo(np.float16).max:
            raise ValueError(f"weight {v.path} exceeds the float16 range "
                             f"(max |x| = {np.abs(value).max():.3g}); nothing written.")
        half = value.astype(np.float16)
        scale = np.abs(value).max(initial=0.0)
        if scale > 0:
            worst = max(worst, float(np.abs(half.astype(np.float32) - value).max() / scale))
        arrays.append(half)
        paths.append(v.path)
    if len(set(paths)) != len(paths):
        raise ValueError("the encoder's variable paths are not unique; cannot key the weights.")
    parts, size = [[]], 0
    for i, a in enumerate(arrays):
        if a.nbytes > max_part_bytes:
            raise ValueError(f"weight {paths[i]} ({a.nbytes} bytes) is larger than a part.")
        if size + a.nbytes > max_part_bytes and parts[-1]:
            parts.append([])
            size = 0
        parts[-1].append(i)
        size += a.nbytes
    names = []
    info = {**meta, "paths": paths, "shapes": [list(a.shape) for a in arrays],
            "dtype": "float16", "parameters": int(sum(a.size for a in arrays)),
            "max_relative_rounding_error": worst}
    for k, idx in enumerate(parts):
        name = f"{entry}.weights-{k + 1}-of-{len(parts)}.npz"
        part_meta = json.dumps({**info, "part": k + 1, "parts": len(parts)})
        tmp = os.path.join(out_dir, f".tmp-{name}")
        with open(tmp, "wb") as f:
            np.savez(f, __meta__=np.frombuffer(part_meta.encode(), np.uint8),
                     **{paths[i]: arrays[i] for i in idx})
        os.replace(tmp, os.path.join(out_dir, name))
        names.append(name)
    return names


def load_float16_weights(files) -> tuple[dict[str, np.ndarray], dict]:
    """``({path: float16 array}, meta)`` of the parts written by :func:`save_float16_weights`
    (all parts of one save must be given; checked)."""
    weights, meta, seen = {}, None, set()
    for path in sorted(files):
        with np.load(path, allow_pickle=False) as z:
            m = json.loads(z["__meta__"].tobytes().decode())
            for key in z.files:
                if key != "__meta__":
                    weights[key] = z[key]
        if meta is not None and m["paths"] != meta["paths"]:
            raise ValueError(f"{path} belongs to another save than {sorted(files)[0]}.")
        meta = m
        seen.add(m["part"])
    if meta is None:
        raise ValueError("no weight parts given.")
    if seen != set(range(1, meta["parts"] + 1)) or set(weights) != set(meta["paths"]):
        raise ValueError(f"incomplete weights: parts {sorted(seen)} of {meta['parts']}, "
                         f"{len(weights)} of {len(meta['paths'])} arrays.")
    return weights, meta


def set_encoder_weights(encoder, weights: dict[str, np.ndarray]) -> None:
    """Assigns float16 weights (by variable path) to ``encoder``, cast to each variable's
    dtype; every variable must be matched, with its shape."""
    variables = {v.path: v for v in encoder.weights}
    missing, extra = sorted(set(variables) - set(weights)), sorted(set(weights) - set(variables))
    if missing or extra:
        raise ValueError(f"the weights do not match the encoder: missing {missing[:3]}, "
                         f"unexpected {extra[:3]} ({len(missing)} / {len(extra)}).")
    for path, v in variables.items():
        if tuple(v.shape) != tuple(weights[path].shape):
            raise ValueError(f"weight {path}: shape {weights[path].shape}, encoder {v.shape}.")
        v.assign(weights[path].astype(np.float32).astype(v.dtype))


def _write_json(path, value):
    with open(path + ".tmp", "w") as f:
        json.dump(value, f, indent=1, default=str)
    os.replace(path + ".tmp", path)


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _train_main(a):
    os.environ.setdefault("KERAS_BACKEND", "jax")
    run_dir = os.path.abspath(a.run_dir or os.path.join(RUN_ROOT, a.entry))
    if a.fresh and os.path.isdir(run_dir):
        shutil.rmtree(run_dir)
    os.makedirs(run_dir, exist_ok=True)
    # Compiled steps are reused by the next invocation on the same machine.
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(run_dir, "jax_cache"))
    deadline = START + 60.0 * a.minutes

    from keras_hardneg import run
    from keras_hardneg.modalities.image import MONITOR_TEST_LIMIT, MONITOR_TRAIN_LIMIT

    zoo, recipe, differs = gpu_recipe(a.entry, a.models_dir, batch_size=a.batch_size,
                                      epochs=a.epochs, precision=a.precision, width=a.width,
                                      override=json.loads(a.override) if a.override else None)
    saved = os.path.join(run_dir, "recipe.json")
    if os.path.isfile(saved):
        before = run.load_recipe(saved)
        if before != recipe:
            raise SystemExit(f"{run_dir} holds a run of another recipe (differs in "
                             f"{recipe_diff(before, recipe)}); give --fresh to start over "
                             "or another --run-dir.")
    train_packs = sorted(p for pattern in a.train_pack for p in glob.glob(pattern))
    if not train_packs:
        raise SystemExit(f"--train-pack {a.train_pack}: no such file (make it with "
                         "`python benchmarks/gpu/zoo_train.py pack`).")
    t0 = time.perf_counter()
    x, y, skipped = load_packs(train_packs)
    xt, yt, skipped_t = load_packs(a.test_pack)
    from keras_hardneg.data.decode import to_unit_float

    description = (f"CIFAR-10 JPEG ({os.path.basename(os.path.normpath(SOURCE))}) from "
                   f"{len(train_packs)} pack(s): {len(x)} train images; kNN monitor on "
                   f"{min(len(x), MONITOR_TRAIN_LIMIT)} train / "
                   f"{min(len(xt), MONITOR_TEST_LIMIT)} test")
    data = ((to_unit_float(x), y), (to_unit_float(xt), yt), description)
    decode_s = time.perf_counter() - t0
    del x, xt
    hw = hardware()
    inv_path = os.path.join(run_dir, "invocations.json")
    invocations = json.load(open(inv_path)) if os.path.isfile(inv_path) else []
    command = "KERAS_BACKEND=jax python " + " ".join(
        [os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)] + sys.argv[1:])
    print(f"{a.entry}: {len(data[0][0])} train ({skipped} undecodable), {len(data[1][0])} "
          f"test ({skipped_t}); decoded in {decode_s:.1f}s; {hw}", flush=True)
    print(f"differs from models/{a.entry}/recipe.json: {differs}", flush=True)
    budget, log = make_callbacks(run_dir, deadline, a.reserve_seconds, recipe["batch_size"],
                                 hw, len(invocations) + 1)
    # Recorded at the start (a killed invocation stays listed, "completed": false).
    invocations.append({
        "invocation": len(invocations) + 1, "command": command, "hardware": hw,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "epochs_before": len(epoch_log(run_dir)), "completed": False})
    _write_json(inv_path, invocations)
    t_fit = time.perf_counter()
    results = run.train(recipe, run_dir, resume=True, verbose=0, export=False,
                        extra_callbacks=[budget, log], data=data)
    invocations[-1].update(
        completed=True, wall_seconds=round(time.perf_counter() - START, 1),
        train_call_seconds=round(time.perf_counter() - t_fit, 1),
        decode_seconds=round(decode_s, 1), epochs_after=results["epochs_run"],
        stopped_by_budget=budget.stopped,
        gpu_knn_accuracy_full_bank_test_pack=results.get("knn_accuracy"))
    _write_json(inv_path, invocations)
    done = results["epochs_run"] >= recipe["epochs"]
    print(f"{a.entry}: {results['epochs_run']}/{recipe['epochs']} epochs; kNN (full train bank,"
          f" test pack) {results.get('knn_accuracy')}; this invocation "
          f"{time.perf_counter() - START:.0f}s", flush=True)
    if not (done or a.export_partial):
        print(f"NOT FINISHED: run the same command again (resumes from {run_dir}/backup)")
        return 0
    if not a.out:
        return 0
    os.makedirs(a.out, exist_ok=True)
    rows = epoch_log(run_dir)
    minutes = sum(r.get("epoch_seconds") or r.get("train_seconds") or 0 for r in rows) / 60
    meta = {"entry": a.entry, "epochs_run": results["epochs_run"], "finished": done,
            "encoder": recipe["encoder"], "input_shape": [32, 32, 3]}
    # The model train() fitted (the callbacks hold it): its weights are those of the last
    # committed checkpoint (training stops only at an epoch's end; a finished run restores).
    encoder = log.model.encoder
    names = save_float16_weights(encoder, a.out, a.entry, meta)
    with open(os.path.join(a.out, f"{a.entry}.epochs.jsonl"), "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    summary = {
        "entry": a.entry, "finished": done, "epochs_run": results["epochs_run"],
        "recipe": recipe, "zoo_recipe": zoo, "differs_from_zoo_recipe": differs,
        "batch_size": recipe["batch_size"], "training_minutes": round(minutes, 2),
        "invocation_minutes": round(sum(i.get("wall_seconds", 0) for i in invocations) / 60, 2),
        "invocations": invocations, "hardware": hw, "data": description,
        "gpu_knn_accuracy_full_bank_test_pack": results.get("knn_accuracy"),
        "weights": {n: _sha256(os.path.join(a.out, n)) for n in names},
        "python": platform.python_version()}
    with open(os.path.join(a.out, f"{a.entry}.run.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    print(f"wrote {names} + {a.entry}.epochs.jsonl + {a.entry}.run.json to {a.out}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    pk = sub.add_parser("pack", help="pack CIFAR-10 JPEGs for the GPU machine")
    pk.add_argument("--source", default=SOURCE, help="cifar10-jpg folder (train/, test/)")
    pk.add_argument("--dest", default=os.path.join(ROOT, ".gpu_data"))
    pk.add_argument("--shards", type=int, default=1, help="train split in this many files")
    pk.add_argument("--train-limit", type=int, help="first N train images per class (tiny)")
    pk.add_argument("--skip-train", action="store_true", help="pack the test images only")
    pk.add_argument("--test-per-class", type=int, default=200,
                    help="test images per class for the kNN monitor (0: none)")
    tr = sub.add_parser("train", help="one invocation of training (resumes)")
    tr.add_argument("--entry", required=True, help=f"zoo entry, e.g. {', '.join(ENTRIES)}")
    tr.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    tr.add_argument("--train-pack", nargs="+",
                    default=[os.path.join(ROOT, ".gpu_data", "cifar10_train*.npz")],
                    help="train pack(s) or shards (globs)")
    tr.add_argument("--test-pack", default=os.path.join(ROOT, ".gpu_data",
                                                        "cifar10_test2000.npz"))
    tr.add_argument("--run-dir", help=f"resume state (default {RUN_ROOT}/ENTRY)")
    tr.add_argument("--out", help="where the finished entry's files go ($OUT)")
    tr.add_argument("--minutes", type=float, default=9.0,
                    help="wall minutes of this invocation (0: one epoch)")
    tr.add_argument("--reserve-seconds", type=float, default=30.0,
                    help="kept after the last epoch for the evaluation and the files")
    tr.add_argument("--epochs", type=int, default=GPU_PLAN["epochs"])
    tr.add_argument("--batch-size", type=int, default=GPU_PLAN["batch_size"])
    tr.add_argument("--precision", default=GPU_PLAN["precision"])
    tr.add_argument("--width", type=int, help="encoder width (default: the recipe's, 64)")
    tr.add_argument("--override", help="JSON merged into the recipe (recorded)")
    tr.add_argument("--fresh", action="store_true", help="delete the run directory first")
    tr.add_argument("--export-partial", action="store_true",
                    help="write the weights to --out even when not finished")
    a = p.parse_args(argv)
    if a.command == "pack":
        return _pack_main(a)
    return _train_main(a)


if __name__ == "__main__":
    sys.exit(main())
