"""What ``train`` checks in an output directory before it writes anything there.

* :func:`check_output_dir`: the folder can be created and written (not a file, not
  read-only), else one line naming it.
* :func:`stored_run`: what an earlier ``train`` left there (its recipe, the epoch its last
  committed backup reached, whether it finished).
* :func:`check_resume`: a rerun into a run directory must train the recipe stored there;
  a different one is refused naming the keys that differ and the way out, before any file
  of the earlier run is touched.
* :func:`check_own_files`: ``train`` never replaces a file it did not write. A folder is a
  run of this package when it holds :data:`RUN_MARKER` (written before anything else) or,
  from versions before the marker, ``recipe.json`` beside ``backup/``; in any other folder
  a file or folder of the names a run writes (:data:`RUN_FILES`) is the user's and is
  refused in one line naming it and the way out.
* :func:`remove_new_files`: what a ``train`` that failed before its first committed epoch
  had created is removed again (the folder is left as it was found).
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

from keras_hardneg.registry import ConfigError

__all__ = ["OutputDirError", "check_output_dir", "stored_run", "recipe_differences",
           "check_resume", "RUN_MARKER", "RUN_FILES", "is_own_run", "check_own_files",
           "mark_run", "remove_new_files"]

#: The file ``train`` writes first into its output folder: the folder's run is this
#: package's (its other files may be replaced by a rerun).
RUN_MARKER = ".keras-hardneg-run.json"
#: What ``train`` writes into a run directory (besides :data:`RUN_MARKER`).
RUN_FILES = ("recipe.json", "backup", "baseline.json", "history.json", "history.csv",
             "history.png", "tensorboard", "results.json", "encoder", "preset",
             "tokenizer.json", "probe.json", "projector", "report.html")


class OutputDirError(ConfigError):
    """An output folder cannot be used (a file, read-only, or another run's recipe)."""


def check_output_dir(path: str, what: str = "output directory", create: bool = True) -> str:
    """Checks that ``path`` is (or can be made) a writable folder; returns its absolute path.

    With ``create`` the folder is made and a probe file written and removed there (the
    only reliable test: ``os.access`` says yes to root on a read-only file system).

    Raises:
        OutputDirError: ``path`` is a file, lies under a file, or cannot be written; the
            message names ``what`` and the path in one line.
    """
    path = os.path.abspath(os.fspath(path))
    if os.path.lexists(path) and not os.path.isdir(path):
        raise OutputDirError(f"{what} {path!r} is a file, not a folder; give a folder path "
                             "(it is created if missing).")
    ancestor = os.path.dirname(path)
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise OutputDirError(f"{what} {path!r} lies under the file {ancestor!r}; give a "
                             "folder path.")
    if not create:
        return path
    probe = os.path.join(path, f".khn-write-test-{uuid.uuid4().hex[:8]}")
    try:
        os.makedirs(path, exist_ok=True)
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise OutputDirError(f"{what} {path!r} cannot be written ({e.strerror or e}); give a "
                             "folder you can write to.") from None
    return path


def _committed_epoch(backup_dir: str) -> int:
    try:
        with open(os.path.join(backup_dir, "training_metadata.json")) as f:
            return int(json.load(f).get("epoch", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def stored_run(output_dir: str) -> dict[str, Any] | None:
    """What an earlier ``train`` left in ``output_dir``: ``{"recipe": dict or None,
    "epoch": committed epoch (0: none), "results": results.json's dict or None}``; None when
    the folder holds no run (no ``recipe.json``)."""
    recipe_path = os.path.join(output_dir, "recipe.json")
    if not os.path.isfile(recipe_path):
        return None
    try:
        with open(recipe_path) as f:
            recipe = json.load(f)
    except (OSError, ValueError):
        recipe = None
    results = None
    try:
        with open(os.path.join(output_dir, "results.json")) as f:
            results = json.load(f)
    except (OSError, ValueError):
        pass
    return {"recipe": recipe, "epoch": _committed_epoch(os.path.join(output_dir, "backup")),
            "results": results}


def recipe_differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two recipes (sorted). A section whose
    ``name`` differs is reported by its name alone (its other keys follow from it)."""
    if isinstance(old, dict) and isinstance(new, dict):
        if "name" in old and "name" in new and old["name"] != new["name"] and prefix:
            return [f"{prefix}name"]
        out = []
        for key in sorted(set(old) | set(new), key=str):
            out += recipe_differences(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)):
        old, new = list(old), list(new)
    return [] if old == new else [prefix[:-1]]


def check_resume(recipe: dict[str, Any], output_dir: str, resume: bool,
                 flag: str = "resume=False") -> dict[str, Any] | None:
    """Refuses to resume ``output_dir`` with another recipe; returns :func:`stored_run`.

    A folder whose run trained nothing yet (no committed backup, no results) may take a new
    recipe; so may any folder with ``resume=False`` (the run starts over).

    Raises:
        OutputDirError: naming the differing keys (old -> new) and the way out: ``flag``
            (the CLI says ``--no-resume``) or another output folder.
    """
    stored = stored_run(output_dir)
    if not resume or stored is None or (stored["epoch"] == 0 and stored["results"] is None):
        return stored
    old = stored["recipe"]
    if old is None:
        raise OutputDirError(f"{output_dir!r} holds an unreadable recipe.json; start over "
                             f"with {flag} or choose another output folder.")
    # The stored recipe as this version reads it (a wave-1 recipe is upgraded, defaults
    # filled in), then both through JSON (tuples are lists there).
    from keras_hardneg.run.recipe import RecipeError, load_recipe

    try:
        old = json.loads(json.dumps(load_recipe(old), default=str))
    except RecipeError:
        pass  # compared as stored: the differences name what no longer loads
    new = json.loads(json.dumps(recipe, default=str))
    keys = recipe_differences(old, new)
    if keys:
        shown = ", ".join(f"{k} ({_get(old, k)!r} -> {_get(new, k)!r})" for k in keys[:4])
        more = f" and {len(keys) - 4} more" if len(keys) > 4 else ""
        raise OutputDirError(
            f"{output_dir!r} holds a run of another recipe (trained to epoch "
            f"{stored['epoch']}); it differs in {shown}{more}. Start over with {flag}, or "
            "choose another output folder.")
    return stored


def _get(recipe: dict[str, Any], dotted: str) -> Any:
    value: Any = recipe
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def is_own_run(output_dir: str) -> bool:
    """Whether ``output_dir`` holds a run this package wrote: :data:`RUN_MARKER`, or (runs
    of versions before the marker) ``recipe.json`` beside ``backup/``."""
    return os.path.isfile(os.path.join(output_dir, RUN_MARKER)) or (
        os.path.isfile(os.path.join(output_dir, "recipe.json"))
        and os.path.isdir(os.path.join(output_dir, "backup")))


def check_own_files(output_dir: str, recipe: dict[str, Any] | None = None) -> None:
    """Refuses to train into a folder whose files of a run's names are not this package's.

    Nothing is checked in a run directory of this package (:func:`is_own_run`) or a folder
    that does not exist. Elsewhere every name of :data:`RUN_FILES` present there is the
    user's; the one exception is a ``recipe.json`` equal to ``recipe`` (as saved), which
    ``train`` leaves as it is.

    Raises:
        OutputDirError: one line naming the first such file and the way out.
    """
    if not os.path.isdir(output_dir) or is_own_run(output_dir):
        return
    for name in RUN_FILES:
        path = os.path.join(output_dir, name)
        if not os.path.lexists(path):
            continue
        if name == "recipe.json" and recipe is not None and _same_recipe(path, recipe):
            continue
        kind = "folder" if os.path.isdir(path) else "file"
        raise OutputDirError(
            f"{output_dir!r} holds the {kind} {name!r}, which keras-hardneg did not write "
            f"(the folder holds no run of it); refusing to replace it: give another output "
            f"folder, or move {name!r} out of it.")


def _same_recipe(path: str, recipe: dict[str, Any]) -> bool:
    try:
        with open(path) as f:
            return json.load(f) == json.loads(json.dumps(recipe, default=str))
    except (OSError, ValueError):
        return False


def mark_run(output_dir: str) -> None:
    """Writes :data:`RUN_MARKER` (if absent): the folder's run files are this package's."""
    path = os.path.join(output_dir, RUN_MARKER)
    if os.path.isfile(path):
        return
    from keras_hardneg import __version__
    from keras_hardneg._io import atomic_write_json

    atomic_write_json(path, {"format": "keras_hardneg.run/1", "written_by": "keras-hardneg "
                             f"{__version__} train", "files": list(RUN_FILES)}, indent=1)


def clear_previous_run(output_dir: str) -> list[str]:
    """Before a run that starts over (``--no-resume``) in a run directory of this package:
    removes the earlier run's outputs (every :data:`RUN_FILES` entry but ``recipe.json``,
    which the new run rewrites), so no file of the earlier run (an ``encoder/`` whose card
    says 1 epoch beside a 2-epoch recipe) outlives it. A folder that is not this package's
    run (:func:`is_own_run`) is left as it is. Returns the names removed."""
    import shutil

    if not os.path.isdir(output_dir) or not is_own_run(output_dir):
        return []
    removed = []
    for name in RUN_FILES:
        path = os.path.join(output_dir, name)
        if name == "recipe.json" or not os.path.lexists(path):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
        removed.append(name)
    return removed


def remove_new_files(output_dir: str, before: set[str] | None) -> None:
    """After a ``train`` that failed before committing an epoch: removes what it created in
    ``output_dir`` (entries of :data:`RUN_FILES` and :data:`RUN_MARKER` not in ``before``,
    the listing taken before it started), and the folder itself if ``before`` is ``None``
    (it did not exist) and it is empty now. Files that were there before stay."""
    import shutil

    if not os.path.isdir(output_dir):
        return
    for name in (*RUN_FILES, RUN_MARKER):
        path = os.path.join(output_dir, name)
        if (before is None or name not in before) and os.path.lexists(path):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except OSError:
                    pass
    if before is None:
        try:
            os.rmdir(output_dir)  # only if empty
        except OSError:
            pass
