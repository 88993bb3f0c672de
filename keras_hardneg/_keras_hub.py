"""keras-hub, the optional extra behind pretrained text encoders: its import (with the
install hint), and keras-hub preset *names* (``"bert_base_en_uncased"``,
``"hf://owner/model"``, ``"kaggle://..."``), which keras-hub resolves and downloads (online
only) where a local checkpoint folder is not given. Shared by
:mod:`keras_hardneg.encoders.pretrained_text` and :mod:`keras_hardneg.data.tokenizer`."""

from __future__ import annotations

import os
import re
from typing import Any

INSTALL = ('pip install "keras-hardneg[pretrained]" (keras-hub, safetensors and, on '
           'TensorFlow, tensorflow-text==2.20.1)')

#: Files a BERT-family preset's tokenizer may have (Hugging Face: tokenizer.json, vocab.txt;
#: keras-hub: its tokenizer config and vocabulary asset).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "assets/tokenizer/vocabulary.txt")


def import_keras_hub() -> Any:
    """``keras_hub``, or ImportError saying how to install it."""
    try:
        import keras_hub
    except ImportError as err:
        raise ImportError(f"A pretrained text encoder needs keras-hub, which cannot be "
                          f"imported ({err}); install it: {INSTALL}.") from err
    return keras_hub


def is_preset_name(preset: Any) -> bool:
    """Whether ``preset`` names a keras-hub preset rather than a local folder: a handle
    (``scheme://...``), or a bare name (letters, digits, ``_`` and ``-``: no path separator
    or file extension) that is not an existing path."""
    if not isinstance(preset, (str, os.PathLike)):
        return False
    text = os.fspath(preset)
    if "://" in text:
        return True
    return re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_\-]*", text) is not None and \
        not os.path.exists(text)


def fetch_preset_files(name: str, files: tuple[str, ...] = ("config.json",) + TOKENIZER_FILES
                       ) -> str:
    """The local folder keras-hub downloads (or has cached) preset ``name`` to, with those of
    ``files`` it has (``config.json`` required).

    Raises:
        ValueError: one line naming ``preset`` when keras-hub cannot fetch it (offline, an
            unknown name).
    """
    import_keras_hub()
    from keras_hub.src.utils.preset_utils import get_file  # keras-hub's own resolver

    try:
        config = get_file(name, files[0])
    except Exception as err:  # noqa: BLE001 -- offline, unknown name: keras-hub's own types
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"`preset` {name!r}: keras-hub could not fetch this preset ({first}); "
                         "pass a local checkpoint folder (Hugging Face or keras-hub format) "
                         "when offline.") from None
    folder = os.path.dirname(config)
    for extra in files[1:]:
        try:
            get_file(name, extra)
        except Exception:  # noqa: BLE001 -- optional file (each format has some)
            continue
    return folder
