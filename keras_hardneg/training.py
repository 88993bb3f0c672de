"""Runs a recipe end to end: data, model, fit (resumable), evaluation, export.

This is what ``keras-hardneg train``, the zoo, the tuner and the benchmarks
call. One function, :func:`run`, and the pieces it is made of, each usable
alone (:func:`load_data`, :func:`build_model`, :func:`make_train_dataset`).

Example:
>>> from keras_hardneg import training
>>> result = training.run({"data": {"name": "digits"}, "epochs": 1}, "/tmp/khn-doc-run",
...                       verbose=0)  # doctest: +SKIP
>>> sorted(result)  # doctest: +SKIP
['export_dir', 'history', 'knn_accuracy', 'linear_probe_accuracy', ...]
"""

import json
import os
import time

import keras
import numpy as np
import tensorflow as tf

from keras_hardneg import augment, callbacks, encoders, evaluation
from keras_hardneg import losses as losses_lib
from keras_hardneg import models, optimizers
from keras_hardneg.recipes import RecipeError, load_recipe, save_recipe

__all__ = ["run", "load_data", "build_model", "build_loss", "make_train_dataset",
           "evaluate_encoder"]

MONITOR_TRAIN_LIMIT = 10000
MONITOR_TEST_LIMIT = 2000


# ------------------------------------------------------------------------- data
def load_data(recipe):
    """``(x_train, y_train), (x_test, y_test), description`` as arrays in ``[0, 1]``."""
    from keras_hardneg import data as data_lib

    spec = recipe["data"]
    seed = recipe["seed"]
    if spec["name"] == "digits":
        size = spec.get("image_size")
        train, test = data_lib.load_digits(test_fraction=spec.get("test_fraction", 0.2), seed=seed,
                                           image_size=size)
        desc = "scikit-learn digits (embedded), 8x8 grayscale as RGB" if not size else \
            f"scikit-learn digits (embedded), resized to {size}x{size}"
        return train, test, desc
    if spec["name"] == "image_folder":
        size = spec.get("image_size", 32)
        on_error = spec.get("on_error", "skip")  # undecodable files: skip (counted) or raise
        train = data_lib.load_image_folder_arrays(
            spec["train"], image_size=(size, size), limit_per_class=spec.get("limit_per_class"),
            on_error=on_error)
        if spec.get("test"):
            test = data_lib.load_image_folder_arrays(
                spec["test"], image_size=(size, size), on_error=on_error,
                limit_per_class=spec.get("test_limit_per_class", spec.get("limit_per_class")))
        else:
            rng = np.random.default_rng(seed)
            order = rng.permutation(len(train[0]))
            cut = int(len(order) * (1 - spec.get("test_fraction", 0.2)))
            test = (train[0][order[cut:]], train[1][order[cut:]])
            train = (train[0][order[:cut]], train[1][order[:cut]])
        limit = spec.get("limit_per_class")
        desc = f"image folder {spec['train']} ({len(train[0])} images{', limited' if limit else ''})"
        return train, test, desc
    # tfds: materialised as arrays (CIFAR/STL-sized data; ImageNet wants streaming).
    size = spec.get("image_size")

    def arrays(split):
        ds = data_lib.tfds_dataset(
            spec["dataset"], split=split, data_dir=spec.get("data_dir"),
            image_size=None if size is None else (size, size), batch_size=1024, shuffle=False)
        xs, ys = [], []
        for x, y in ds:
            xs.append(x.numpy())
            ys.append(y.numpy())
        return np.concatenate(xs), np.concatenate(ys)

    train = arrays(spec.get("train_split", "train"))
    test = arrays(spec.get("test_split", "test"))
    return train, test, f"tfds {spec['dataset']} ({len(train[0])} train images)"


# ------------------------------------------------------------------------ model
def build_loss(recipe):
    """The recipe's loss object."""
    spec = dict(recipe["loss"])
    name = spec.pop("name")
    allowed = {
        "nt_xent": {"temperature"},
        "debiased": {"temperature", "tau_plus"},
        "hard": {"temperature", "tau_plus", "beta"},
        "ring": {"temperature", "lower_percentile", "upper_percentile"},
        "unremix": {"temperature", "tau_plus", "beta", "weights"},
    }[name]
    extra = set(spec) - allowed
    if extra:
        raise RecipeError(f"recipe key 'loss.{sorted(extra)[0]}' does not apply to loss '{name}'; "
                          f"it takes {', '.join(sorted(allowed))}.")
    return losses_lib.get(name, **spec)


def _build_encoder(recipe, input_shape):
    spec = recipe["encoder"]
    width = spec.get("width")
    kwargs = {} if width is None else {"width": width}
    if spec["name"] == "small_convnet":
        return encoders.small_convnet(input_shape=input_shape, **kwargs)
    if spec["name"] == "resnet18_cifar":
        return encoders.resnet18_cifar(input_shape=input_shape, **kwargs)
    return encoders.resnet50(input_shape=input_shape, **kwargs)


def _build_optimizer(recipe, steps_per_epoch):
    spec = recipe["optimizer"]
    lr = spec.get("learning_rate", 1e-3)
    sched = recipe["schedule"]
    total = steps_per_epoch * recipe["epochs"]
    if sched["name"] == "warmup_cosine":
        lr = optimizers.WarmupCosineDecay(
            lr, total_steps=max(total, 1),
            warmup_steps=min(sched.get("warmup_epochs", 0) * steps_per_epoch, max(total - 1, 0)))
    wd = spec.get("weight_decay", 0.0)
    name = spec["name"]
    if name == "adam":
        return keras.optimizers.Adam(lr)
    if name == "adamw":
        return keras.optimizers.AdamW(lr, weight_decay=wd)
    if name == "sgd":
        return keras.optimizers.SGD(lr, momentum=spec.get("momentum", 0.9))
    if name == "lamb":
        return keras.optimizers.Lamb(lr)
    return optimizers.LARS(lr, momentum=spec.get("momentum", 0.9), weight_decay=wd)


def build_model(recipe, input_shape, num_examples=None):
    """The recipe's framework (SimCLR or MoCo), compiled."""
    keras.utils.set_random_seed(recipe["seed"])
    encoder = _build_encoder(recipe, input_shape)
    aug_spec = recipe["augmentation"]
    augmentation = augment.simclr_augmentation(
        image_size=input_shape[0], version=aug_spec.get("version", "v1"),
        strength=aug_spec.get("strength", 1.0),
        crop_scale=tuple(aug_spec.get("crop_scale", (0.08, 1.0))), seed=recipe["seed"])
    bank = num_examples if recipe["sampler"]["name"] in ("batchsampler", "knn") else None
    dims = tuple(recipe["projection_dims"])
    if recipe["framework"] == "simclr":
        model = models.SimCLR(encoder, projection_dims=dims, augmentation=augmentation,
                              memory_bank_size=bank)
    else:
        model = models.MoCo(encoder, projection_dims=dims, augmentation=augmentation,
                            version=recipe["framework"].split("_")[1],
                            queue_size=recipe["moco"]["queue_size"],
                            momentum=recipe["moco"]["momentum"], memory_bank_size=bank,
                            seed=recipe["seed"])
    steps = max((num_examples or recipe["batch_size"]) // recipe["batch_size"], 1)
    model.compile(optimizer=_build_optimizer(recipe, steps), loss=build_loss(recipe))
    return model


# ------------------------------------------------------------------------- feed
def make_train_dataset(recipe, x_train, y_train):
    """``(dataset, steps_per_epoch, extra_callbacks, sampler)`` for the recipe's sampler.

    Uniform: shuffled batches (a new order every epoch, seeded). BatchSampler /
    kNN: index batches from :mod:`keras_hardneg.sampling`, with the graph kept
    fresh from the embeddings the model computes in training.
    """
    b = recipe["batch_size"]
    n = len(x_train)
    if b > n:
        raise RecipeError(f"recipe key 'batch_size' = {b} is larger than the dataset ({n} examples).")
    steps = n // b
    spec = recipe["sampler"]
    if spec["name"] == "uniform":
        ds = tf.data.Dataset.from_tensor_slices((x_train.astype("float32"), y_train))
        ds = ds.shuffle(n, seed=recipe["seed"], reshuffle_each_iteration=True)
        ds = ds.batch(b, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
        return ds.repeat(), steps, [], None
    from keras_hardneg import sampling

    # The first graph comes from a fixed random projection of the pixels (no
    # forward pass); from then on the model's own projections refresh it.
    rng = np.random.default_rng(recipe["seed"])
    flat = x_train.reshape(n, -1).astype("float32")
    initial = flat @ rng.normal(size=(flat.shape[1], 64)).astype("float32")
    m = min(spec.get("num_candidates", 500), n - 1)
    k = min(spec.get("num_neighbors", 100), m - 1)
    if spec["name"] == "batchsampler":
        restart = spec.get("restart_prob", [0.2, 0.05])
        restart = restart if isinstance(restart, (list, tuple)) else [restart, restart]
        sampler = sampling.BatchSampler(initial, b, restart_prob=restart[0], num_candidates=m,
                                        num_neighbors=k, backend=spec.get("backend", "auto"),
                                        seed=recipe["seed"])
        schedule = tuple(restart)
    else:
        sampler = sampling.KNNSampler(initial, b, num_neighbors=k, seed=recipe["seed"])
        schedule = None
    ds = sampling.make_dataset(sampler, x_train.astype("float32"), y_train)
    refresh = callbacks.GraphRefreshCallback(
        sampler, every_n_steps=spec.get("refresh_every", 100),
        restart_prob_schedule=schedule, num_candidates=m, num_neighbors=k)
    return ds, sampler.steps_per_epoch, [refresh], sampler


# --------------------------------------------------------------------- evaluate
def evaluate_encoder(encoder, train, test, k=200, temperature=0.1, linear_probe=True):
    """Weighted kNN (and linear-probe) accuracy of ``encoder`` on labelled arrays."""
    f_train = evaluation.extract_features(encoder, train[0])
    f_test = evaluation.extract_features(encoder, test[0])
    out = {"knn_accuracy": float(evaluation.weighted_knn_accuracy(
        f_train, train[1], f_test, test[1], k=k, temperature=temperature))}
    if linear_probe:
        out["linear_probe_accuracy"] = float(evaluation.linear_probe_accuracy(
            f_train, train[1], f_test, test[1]))
    return out


def _subset(arrays, limit, seed):
    x, y = arrays
    if len(x) <= limit:
        return x, y
    idx = np.random.default_rng(seed).permutation(len(x))[:limit]
    return x[idx], y[idx]


class _EpochTimer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["epoch_seconds"] = time.perf_counter() - self._start


# -------------------------------------------------------------------------- run
def run(recipe, output_dir, *, resume=True, verbose=1, export=True, extra_callbacks=(),
        data=None):
    """Trains, evaluates and exports what ``recipe`` describes, into ``output_dir``.

    ``output_dir`` receives ``recipe.json``, ``backup/`` (resume state: a killed
    run continues from its last finished epoch when run again), ``history.json``,
    ``results.json`` and ``encoder/`` (the exported SavedModel with its model card).

    Args:
        recipe: path or dict (see :mod:`keras_hardneg.recipes`).
        output_dir: where everything goes (created).
        resume: continue from ``output_dir/backup`` if present.
        verbose: Keras progress bars (1), one line per epoch (2) or silent (0).
        export: write the SavedModel.
        extra_callbacks: more Keras callbacks.
        data: optional ``((x_train, y_train), (x_test, y_test), description)``
            to skip :func:`load_data` (the tuner reuses loaded data).

    Returns:
        dict with ``knn_accuracy``, ``linear_probe_accuracy``, ``history`` (all epochs,
        restored ones included), ``epochs_run``, ``epochs_trained_now`` (the epochs this call
        trained; ``seconds`` and ``images_per_second`` cover only those),
        ``steps_per_epoch``, ``seconds``, ``images_per_second``, ``export_dir`` and
        ``output_dir``.
    """
    recipe = load_recipe(recipe)
    os.makedirs(output_dir, exist_ok=True)
    save_recipe(recipe, os.path.join(output_dir, "recipe.json"))
    keras.config.set_dtype_policy(recipe["precision"])
    try:
        train, test, description = data if data is not None else load_data(recipe)
        x_train, y_train = train
        keras.utils.set_random_seed(recipe["seed"])
        dataset, steps, sampler_callbacks, sampler = make_train_dataset(recipe, x_train, y_train)
        model = build_model(recipe, x_train.shape[1:], num_examples=len(x_train))

        ev = recipe["evaluation"]
        cbs = [callbacks.NonFiniteGuard(), _EpochTimer()]
        if ev.get("monitor_every", 1):
            cbs.append(callbacks.KNNMonitor(
                _subset(train, MONITOR_TRAIN_LIMIT, recipe["seed"]),
                _subset(test, MONITOR_TEST_LIMIT, recipe["seed"]),
                k=ev["knn_k"], temperature=ev["knn_temperature"],
                every_n_epochs=ev["monitor_every"]))
        ann = recipe["annealing"]
        if "beta_changes" in ann:
            cbs.append(callbacks.BetaAnnealing(recipe["epochs"], ann["beta_changes"]))
        if "ring_start" in ann or "ring_end" in ann:
            cbs.append(callbacks.RingAnnealing(recipe["epochs"], ann.get("ring_start", 100.0),
                                               ann.get("ring_end", 10.0)))
        cbs += sampler_callbacks
        backup = os.path.join(output_dir, "backup")
        if not resume and os.path.isdir(backup):
            import shutil

            shutil.rmtree(backup)
        # After the sampler's callbacks: their on_train_begin resets what the backup restores.
        state = {}
        if sampler is not None:
            state["sampler"] = sampler
            for i, cb in enumerate(sampler_callbacks):
                state[f"refresh{i}"] = cb
        backup_cb = callbacks.AtomicBackupAndRestore(backup, delete_checkpoint=False, state=state)
        cbs.append(backup_cb)
        cbs += list(extra_callbacks)

        start = time.perf_counter()
        history = model.fit(dataset, epochs=recipe["epochs"], steps_per_epoch=steps, shuffle=False,
                            callbacks=cbs, verbose=verbose)
        seconds = time.perf_counter() - start
        # Epochs restored from the backup first, then this call's (a resumed run
        # reports all its epochs).
        hist = {}
        for logs in backup_cb.history:
            for k, v in logs.items():
                hist.setdefault(k, []).append(float(v))
        if not hist:
            hist = {k: [float(v) for v in vals] for k, vals in history.history.items()}
        with open(os.path.join(output_dir, "history.json"), "w") as f:
            json.dump(hist, f, indent=1)

        results = evaluate_encoder(model.encoder, train, test, k=ev["knn_k"],
                                   temperature=ev["knn_temperature"],
                                   linear_probe=ev.get("linear_probe", True))
        epochs_run = len(hist.get("loss", []))
        trained_now = len(history.history.get("loss", []))
        results.update(
            history=hist,
            seconds=seconds,
            epochs_run=epochs_run,
            epochs_trained_now=trained_now,
            steps_per_epoch=steps,
            # Only the epochs this call trained (a resumed run restores the others).
            images_per_second=(trained_now * steps * recipe["batch_size"] / seconds
                               if seconds > 0 and trained_now else None),
            data=description,
            output_dir=output_dir,
        )
        if export:
            results["export_dir"] = _export(model, recipe, results, description,
                                            os.path.join(output_dir, "encoder"))
        with open(os.path.join(output_dir, "results.json"), "w") as f:
            json.dump({k: v for k, v in results.items() if k != "history"}, f, indent=1,
                      default=str)
        return results
    finally:
        keras.config.set_dtype_policy("float32")


def _export(model, recipe, results, description, export_dir):
    from keras_hardneg import export as export_lib

    loss = model.loss
    card = export_lib.ModelCard(
        name=recipe["name"],
        description=f"{recipe['framework']} encoder pre-trained with keras-hardneg",
        framework=recipe["framework"],
        loss=type(loss).__name__,
        hyperparameters={**loss.get_config(), "batch_size": recipe["batch_size"],
                         "encoder": recipe["encoder"], "sampler": recipe["sampler"],
                         "optimizer": recipe["optimizer"], "seed": recipe["seed"]},
        data=description,
        epochs=results["epochs_run"],
        knn_accuracy=results.get("knn_accuracy"),
        linear_probe_accuracy=results.get("linear_probe_accuracy"),
        evaluation=(f"weighted kNN (k={recipe['evaluation']['knn_k']}, "
                    f"t={recipe['evaluation']['knn_temperature']}) and logistic-regression "
                    "linear probe on frozen features, train split -> test split"),
        input_shape=tuple(model.encoder.input_shape[1:]),
        output_dim=int(model.encoder.output_shape[-1]),
    )
    export_lib.export_encoder(model.encoder, export_dir, model_card=card, overwrite=True)
    return export_dir
