"""Sentence tokenizers: text -> fixed-length token ids ``int32 [n, L]`` (0 = padding).

The sentence-embedding experiments (unsupervised SimCSE, Gao et al. 2021, "SimCSE: Simple
Contrastive Learning of Sentence Embeddings"; quick-thought vectors, Logeswaran & Lee 2018)
feed a text encoder fixed-length rows of token ids, so a compiled step compiles once.
No pretrained BERT vocabulary is available here, so the default tokenizer is trained on
the corpus itself:

* :func:`train_tokenizer` -- a byte-level BPE (Sennrich et al. 2016; the GPT-2 byte
  alphabet, so no character is ever unknown) on lower-cased, accent-stripped text, trained
  with the ``tokenizers`` package (Rust, no TensorFlow; works under every Keras backend).
  Training is deterministic: the same sentences give the same vocabulary in any process
  (the BPE trainer breaks count ties by the pair itself; ``tokenizers``' WordPiece trainer
  does not -- its ids changed between processes -- which is why this is BPE).
* :func:`wordllama_start` -- the tokenizer and 32,000 x 256 token-embedding table shipped
  inside the ``wordllama`` wheel (MIT; Llama-2's 32k BPE vocabulary, embeddings distilled
  from large language models), read from the installed package's files without any
  download. Its ids are shifted by one so that 0 stays padding.
* :class:`SentenceTokenizer` -- ``encode(sentences, max_length) -> int32 [n, L]``: a
  ``[CLS]``-like id first (every sentence, even an empty one, has a real token, and CLS
  pooling can read it), the sentence's tokens truncated to ``L - 1``, then zeros;
  ``decode``, ``save`` (one JSON file) and :func:`load_tokenizer`.
* :func:`pretrained_tokenizer` -- the WordPiece tokenizer of a pretrained BERT-family
  checkpoint in a Hugging Face-format folder (``tokenizer.json``, else ``vocab.txt``), read
  with ``tokenizers`` (no TensorFlow): rows are ``[CLS] tokens [SEP]`` then zeros, the ids
  BERT was trained on (Devlin et al. 2019), checked against ``vocab.txt``.

Example:
>>> tok = train_tokenizer(["the cat sat on the mat", "the dog sat on the log"] * 5,
...                       vocab_size=300)
>>> ids = tok.encode(["the cat sat", "a dog"], max_length=6)
>>> ids.shape, ids.dtype.name, int(ids[0, 0]) == tok.cls_id, int(ids[1, -1])
((2, 6), 'int32', True, 0)
>>> tok.decode(ids)
['the cat sat', 'a dog']
"""

from __future__ import annotations

import importlib.util
import json
import numbers
import os
import struct
from typing import Any, Iterable, Sequence

import numpy as np

from keras_hardneg._keras_hub import fetch_preset_files, is_preset_name
from keras_hardneg._io import atomic_write_json

__all__ = ["SentenceTokenizer", "load_tokenizer", "pretrained_tokenizer", "train_tokenizer",
           "wordllama_available", "wordllama_start", "tokenizer_data", "write_tokenizer_assets",
           "TOKENIZER_SETTINGS"]

_FORMAT = "keras_hardneg.SentenceTokenizer"
_VERSION = 1
_PAD, _CLS = "[PAD]", "[CLS]"
_TEXT_INSTALL = 'pip install "keras-hardneg[text]" (or pip install tokenizers)'
# The byte alphabet (256) + [PAD] + [CLS]: the smallest vocabulary that can encode anything.
MIN_VOCAB_SIZE = 258


def _tokenizers():
    try:
        import tokenizers
    except ImportError as err:
        raise ImportError(f"The sentence tokenizer needs the `tokenizers` package, which "
                          f"cannot be imported ({err}); install it: {_TEXT_INSTALL}.") from err
    return tokenizers


def _check_sentences(sentences: Any, name: str = "sentences") -> list[str]:
    if isinstance(sentences, (str, bytes)):
        raise ValueError(f"`{name}` must be a list of strings, not one string; got "
                         f"{sentences[:40]!r}... (wrap it in a list).")
    try:
        out = list(sentences)
    except TypeError:
        raise ValueError(f"`{name}` must be a list of strings; got "
                         f"{type(sentences).__name__}.") from None
    for i, s in enumerate(out):
        if not isinstance(s, str):
            raise ValueError(f"`{name}[{i}]` must be a string; got {type(s).__name__} "
                             f"{s!r}.")
    return out


def _check_int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"`{name}` must be an integer >= {low}; got {value!r}.")
    return int(value)


class SentenceTokenizer:
    """Sentences -> fixed-length token ids, around a ``tokenizers.Tokenizer``.

    Ids: ``0`` is padding, :attr:`cls_id` starts every row, the rest are the wrapped
    tokenizer's ids plus :attr:`id_offset` (0 for a trained tokenizer, whose ``[PAD]``
    token is id 0; 1 for wordllama's, whose id 0 is ``<unk>``). Ids are ``< vocab_size``.

    Args:
        tokenizer: a ``tokenizers.Tokenizer``.
        cls_token: the token put first in every row (``"[CLS]"``; wordllama: ``"<s>"``).
        id_offset: added to the wrapped tokenizer's ids (0 or 1).
        kind: ``"trained"``, ``"wordllama"`` or ``"pretrained"`` (what it is, saved with it).
        sep_token: a token put after the (truncated) sentence in every row (BERT's
            ``"[SEP]"``), or None (default: rows end with the sentence).
    """

    def __init__(self, tokenizer: Any, cls_token: str = _CLS, id_offset: int = 0,
                 kind: str = "trained", sep_token: str | None = None):
        tokenizers = _tokenizers()
        if not isinstance(tokenizer, tokenizers.Tokenizer):
            raise ValueError(f"`tokenizer` must be a tokenizers.Tokenizer; got "
                             f"{type(tokenizer).__name__}.")
        if id_offset not in (0, 1):
            raise ValueError(f"`id_offset` must be 0 or 1; got {id_offset!r}.")
        if tokenizer.token_to_id(cls_token) is None:
            raise ValueError(f"`cls_token` {cls_token!r} is not in the tokenizer's vocabulary.")
        if sep_token is not None and tokenizer.token_to_id(sep_token) is None:
            raise ValueError(f"`sep_token` {sep_token!r} is not in the tokenizer's vocabulary.")
        if id_offset == 0 and tokenizer.id_to_token(0) != _PAD:
            raise ValueError(f"With id_offset=0 the tokenizer's id 0 must be {_PAD!r} (0 is "
                             f"padding); got {tokenizer.id_to_token(0)!r}. Use id_offset=1.")
        self.tokenizer = tokenizer
        self.cls_token = cls_token
        self.id_offset = int(id_offset)
        self.kind = kind
        self.sep_token = sep_token

    # ------------------------------------------------------------------ facts
    @property
    def vocab_size(self) -> int:
        """Number of ids (the embedding table's rows): ids are in ``[0, vocab_size)``."""
        return self.tokenizer.get_vocab_size() + self.id_offset

    @property
    def cls_id(self) -> int:
        """The id that starts every encoded row."""
        return self.tokenizer.token_to_id(self.cls_token) + self.id_offset

    @property
    def sep_id(self) -> int | None:
        """The id that ends every encoded sentence (None: no ``sep_token``)."""
        if self.sep_token is None:
            return None
        return self.tokenizer.token_to_id(self.sep_token) + self.id_offset

    pad_id = 0

    def __repr__(self) -> str:
        return f"SentenceTokenizer(kind={self.kind!r}, vocab_size={self.vocab_size})"

    # ---------------------------------------------------------------- encoding
    def tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        """The ids of each sentence (offset applied), without ``[CLS]``, padding or
        truncation."""
        sentences = _check_sentences(sentences)
        encodings = self.tokenizer.encode_batch(sentences, add_special_tokens=False)
        return [[i + self.id_offset for i in e.ids] for e in encodings]

    def encode(self, sentences: Sequence[str], max_length: int = 32) -> np.ndarray:
        """``int32 [n, max_length]``: ``[CLS]``, the first ``max_length - 1`` tokens of each
        sentence (``max_length - 2`` and then ``[SEP]`` with a ``sep_token``), then 0
        (padding).

        Args:
            sentences: a list of strings (not one string).
            max_length: ``L >= 2``.
        """
        max_length = _check_int(max_length, "max_length", 2)
        rows = self.tokenize(sentences)
        out = np.zeros((len(rows), max_length), np.int32)
        out[:, 0] = self.cls_id
        sep = self.sep_id
        for i, row in enumerate(rows):
            row = row[:max_length - 1] if sep is None else row[:max_length - 2] + [sep]
            out[i, 1:1 + len(row)] = row
        return out

    def lengths(self, sentences: Sequence[str]) -> np.ndarray:
        """``int [n]``: each sentence's number of tokens with ``[CLS]`` (and ``[SEP]``),
        before truncation."""
        extra = 1 if self.sep_token is None else 2
        return np.asarray([len(r) + extra for r in self.tokenize(sentences)], np.int64)

    def decode(self, ids: Any) -> list[str] | str:
        """The text of ids ``[n, L]`` (a list) or ``[L]`` (one string); padding, ``[CLS]``
        and special tokens are dropped. A trained tokenizer returns lower-cased text."""
        ids = np.asarray(ids)
        if ids.ndim not in (1, 2) or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"`ids` must be integer ids [n, L] or [L]; got dtype {ids.dtype} "
                             f"shape {ids.shape}.")
        rows = ids[None] if ids.ndim == 1 else ids
        cls_id, sep_id = self.cls_id, self.sep_id
        lists = [[int(i) - self.id_offset for i in row if i not in (0, cls_id, sep_id)]
                 for row in rows]
        texts = [t.strip() for t in self.tokenizer.decode_batch(lists, skip_special_tokens=True)]
        return texts[0] if ids.ndim == 1 else texts

    # ---------------------------------------------------------------- storage
    def to_dict(self) -> dict:
        """Everything needed to rebuild it (what :meth:`save` writes)."""
        out = {"format": _FORMAT, "version": _VERSION, "kind": self.kind,
               "cls_token": self.cls_token, "id_offset": self.id_offset,
               "tokenizer": json.loads(self.tokenizer.to_str())}
        if self.sep_token is not None:
            out["sep_token"] = self.sep_token
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "SentenceTokenizer":
        """Rebuilds a tokenizer from :meth:`to_dict`'s output."""
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f"Not a saved SentenceTokenizer (expected format {_FORMAT!r}).")
        if data.get("version") != _VERSION:
            raise ValueError(f"SentenceTokenizer file version {data.get('version')!r} is not "
                             f"supported (this library reads version {_VERSION}).")
        tok = _tokenizers().Tokenizer.from_str(json.dumps(data["tokenizer"]))
        return cls(tok, cls_token=data["cls_token"], id_offset=data["id_offset"],
                   kind=data.get("kind", "trained"), sep_token=data.get("sep_token"))

    def save(self, path: str | os.PathLike) -> str:
        """Writes the tokenizer as one JSON file (atomically); returns the path."""
        path = os.fspath(path)
        atomic_write_json(path, self.to_dict())
        return path


#: The file beside a Hugging Face ``tokenizer.json`` that holds what a
#: :class:`SentenceTokenizer` adds to it (``cls_token``, ``id_offset``, ``sep_token``,
#: ``kind``): the layout of a preset's or an export's ``assets/`` (:func:`write_tokenizer_assets`).
TOKENIZER_SETTINGS = "keras_hardneg_tokenizer.json"
#: The standard name of the Hugging Face ``tokenizers`` file.
HF_TOKENIZER = "tokenizer.json"


def _read_json(path: str, what: str = "tokenizer file") -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{what} {path!r} is not readable JSON: {err}.") from err


def tokenizer_data(path: str | os.PathLike) -> dict:
    """What :meth:`SentenceTokenizer.to_dict` gives, read from either layout: one file saved
    by :meth:`SentenceTokenizer.save`, or a Hugging Face ``tokenizer.json`` with
    :data:`TOKENIZER_SETTINGS` beside it. JSON only (no ``tokenizers`` package needed).

    Raises:
        ValueError: ``path`` is missing, or is neither layout (naming what is missing).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"tokenizer file {path!r} does not exist.")
    data = _read_json(path)
    if isinstance(data, dict) and data.get("format") == _FORMAT:
        return data
    settings = os.path.join(os.path.dirname(os.path.abspath(path)), TOKENIZER_SETTINGS)
    if not os.path.isfile(settings):
        raise ValueError(f"tokenizer file {path!r}: Not a saved SentenceTokenizer (expected "
                         f"format {_FORMAT!r}), and no {TOKENIZER_SETTINGS} lies beside it (a "
                         "Hugging Face checkpoint's tokenizer: "
                         "keras_hardneg.data.pretrained_tokenizer(folder)).")
    extra = _read_json(settings, "tokenizer settings")
    if not isinstance(extra, dict) or extra.get("format") != _FORMAT:
        raise ValueError(f"tokenizer settings {settings!r}: not a SentenceTokenizer's "
                         f"(expected format {_FORMAT!r}).")
    return {**{k: v for k, v in extra.items() if k != "tokenizer_file"}, "tokenizer": data}


def write_tokenizer_assets(path: str | os.PathLike, folder: str | os.PathLike) -> list[str]:
    """Writes the tokenizer saved at ``path`` (either layout, see :func:`tokenizer_data`)
    into ``folder`` as the standard Hugging Face ``tokenizer.json``
    (``tokenizers.Tokenizer.from_file`` and other tools read it) and
    :data:`TOKENIZER_SETTINGS` beside it; returns the two file names. JSON only.

    Example: ``write_tokenizer_assets("run/tokenizer.json", "preset/assets")``.
    """
    data = dict(tokenizer_data(path))
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    hf = data.pop("tokenizer")
    atomic_write_json(os.path.join(folder, HF_TOKENIZER), hf)
    atomic_write_json(os.path.join(folder, TOKENIZER_SETTINGS),
                      {**data, "tokenizer_file": HF_TOKENIZER}, indent=1)
    return [HF_TOKENIZER, TOKENIZER_SETTINGS]


def load_tokenizer(path: str | os.PathLike) -> SentenceTokenizer:
    """The :class:`SentenceTokenizer` saved at ``path``: a file written by
    :meth:`SentenceTokenizer.save`, or a preset's / an export's ``assets/tokenizer.json``
    (the Hugging Face file, with :data:`TOKENIZER_SETTINGS` beside it).

    Raises:
        ValueError: ``path`` is missing or is not a saved tokenizer.
    """
    path = os.fspath(path)
    data = tokenizer_data(path)
    try:
        return SentenceTokenizer.from_dict(data)
    except ValueError as err:
        raise ValueError(f"tokenizer file {path!r}: {err}") from err


def train_tokenizer(sentences: Iterable[str], vocab_size: int = 8192, min_frequency: int = 2,
                    max_sentences: int | None = None,
                    seed: int | None = None) -> SentenceTokenizer:
    """A byte-level BPE tokenizer trained on ``sentences`` (lower-cased, accents stripped).

    Deterministic: the same sentences and arguments give the same vocabulary, in any
    process. Special tokens: ``[PAD]`` = 0, ``[CLS]`` = 1.

    Args:
        sentences: the training text, a list of strings.
        vocab_size: the largest vocabulary (>= 258: the 256 bytes and the two special
            tokens); training stops earlier when no pair occurs ``min_frequency`` times.
        min_frequency: a merge needs a pair seen at least this often (>= 1).
        max_sentences: train on at most this many sentences, drawn with ``seed``
            (default: all of them).
        seed: the draw of ``max_sentences`` (default 0); unused without it.
    """
    tokenizers = _tokenizers()
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

    sentences = _check_sentences(sentences)
    if not sentences:
        raise ValueError("`sentences` must not be empty.")
    vocab_size = _check_int(vocab_size, "vocab_size", MIN_VOCAB_SIZE)
    min_frequency = _check_int(min_frequency, "min_frequency", 1)
    if max_sentences is not None:
        max_sentences = _check_int(max_sentences, "max_sentences", 1)
        if max_sentences < len(sentences):
            rng = np.random.default_rng(0 if seed is None else seed)
            keep = np.sort(rng.choice(len(sentences), max_sentences, replace=False))
            sentences = [sentences[i] for i in keep]
    tok = tokenizers.Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    # add_prefix_space: a word is the same token at the start of a sentence and inside it.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=[_PAD, _CLS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(sentences, trainer)
    return SentenceTokenizer(tok, cls_token=_CLS, id_offset=0, kind="trained")


# ----------------------------------------------------------------- wordllama
_WORDLLAMA_TOKENIZER = os.path.join("tokenizers", "l2_supercat_tokenizer_config.json")
_WORDLLAMA_WEIGHTS = os.path.join("weights", "l2_supercat_256.safetensors")
_WORDLLAMA_INSTALL = ('pip install wordllama (MIT; its wheel ships the tokenizer and the '
                      '32,000 x 256 embedding table) and the text extra: ' + _TEXT_INSTALL)


def _wordllama_folder() -> str | None:
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def wordllama_available() -> bool:
    """Whether the ``wordllama`` package and its shipped files are installed."""
    folder = _wordllama_folder()
    return folder is not None and all(
        os.path.isfile(os.path.join(folder, f)) for f in (_WORDLLAMA_TOKENIZER,
                                                           _WORDLLAMA_WEIGHTS))


def _read_safetensors(path: str, name: str) -> np.ndarray:
    # The format: an 8-byte little-endian header length, a JSON header
    # {name: {dtype, shape, data_offsets}}, then the raw little-endian data.
    dtypes = {"F16": "<f2", "F32": "<f4", "BF16": None, "F64": "<f8"}
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        if name not in header:
            raise ValueError(f"{path!r} has no tensor {name!r}; it has "
                             f"{sorted(k for k in header if k != '__metadata__')}.")
        entry = header[name]
        dtype = dtypes.get(entry["dtype"])
        if dtype is None:
            raise ValueError(f"{path!r}: tensor dtype {entry['dtype']} is not supported.")
        start, end = entry["data_offsets"]
        f.seek(8 + header_len + start)
        data = f.read(end - start)
    return np.frombuffer(data, dtype=dtype).reshape(entry["shape"]).astype(np.float32)


def wordllama_start() -> tuple[SentenceTokenizer, np.ndarray]:
    """``(tokenizer, table)``: wordllama's tokenizer and token-embedding table, read
    offline from the installed ``wordllama`` wheel (the ``l2_supercat`` model, 256
    dimensions).

    The table is ``float32 [vocab_size, 256]`` aligned with the tokenizer's ids: row 0
    (padding) is zeros and row ``i + 1`` is wordllama's token ``i``. The tokenizer keeps
    wordllama's own normalisation (Llama-2 BPE: case-sensitive).

    Raises:
        ImportError: ``wordllama`` (or ``tokenizers``) is not installed, naming the install.
    """
    folder = _wordllama_folder()
    if folder is None or not wordllama_available():
        raise ImportError("The wordllama start needs the `wordllama` package with its shipped "
                          f"files, which is not installed here: {_WORDLLAMA_INSTALL}.")
    tokenizers = _tokenizers()
    tok = tokenizers.Tokenizer.from_file(os.path.join(folder, _WORDLLAMA_TOKENIZER))
    # Llama-2's post-processor adds <s>; rows get it from encode(), once.
    tok.post_processor = None
    table = _read_safetensors(os.path.join(folder, _WORDLLAMA_WEIGHTS), "embedding.weight")
    if table.shape[0] != tok.get_vocab_size():
        raise ValueError(f"wordllama's table has {table.shape[0]} rows but its tokenizer "
                         f"{tok.get_vocab_size()} tokens.")
    table = np.concatenate([np.zeros((1, table.shape[1]), np.float32), table], axis=0)
    return SentenceTokenizer(tok, cls_token="<s>", id_offset=1, kind="wordllama"), table


_PRETRAINED_INSTALL = 'pip install "keras-hardneg[pretrained]"'


def _read_vocab_txt(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").rstrip("\r") for line in f]


def _keras_hub_tokenizer_config(path: str) -> dict | None:
    """The inner config of a keras-hub ``tokenizer.json`` (a Keras object config, not a
    ``tokenizers`` file), else None."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
    if isinstance(data, dict) and "class_name" in data and "model" not in data:
        return {"class_name": data["class_name"], **(data.get("config") or {})}
    return None


def pretrained_tokenizer(preset: str | os.PathLike) -> SentenceTokenizer:
    """The tokenizer of a pretrained BERT-family checkpoint folder (Hugging Face format).

    Reads ``tokenizer.json`` with ``tokenizers`` (no TensorFlow; any Keras backend); a
    keras-hub preset folder's ``assets/tokenizer/vocabulary.txt`` (its ``lowercase``
    setting kept) or a folder with only ``vocab.txt`` gets BERT's WordPiece pipeline (Devlin et al.
    2019: lower-case, split on whitespace and punctuation, greedy longest-match WordPiece,
    ``[UNK]`` for the rest). Padding and truncation stored in ``tokenizer.json`` are turned
    off (:meth:`SentenceTokenizer.encode` pads with id 0, BERT's ``[PAD]``). Rows are
    ``[CLS] tokens [SEP] 0 ...`` (``int32 [n, L]``).

    Args:
        preset: the folder (``tokenizer.json`` and/or ``vocab.txt``), or a keras-hub
            preset name / handle (``"bert_base_en_uncased"``, ``"hf://owner/model"``):
            keras-hub fetches its files (online only; then cached).

    Raises:
        ValueError: one line naming ``preset`` when the folder or its tokenizer is missing,
            when ``vocab.txt`` and ``tokenizer.json`` disagree, or when id 0 is not
            ``[PAD]`` or ``[CLS]``/``[SEP]`` are absent.

    Example:
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with open(os.path.join(folder, "vocab.txt"), "w") as f:
    ...     _ = f.write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "##s"]))
    >>> tok = pretrained_tokenizer(folder)
    >>> tok.encode(["The cats"], max_length=6).tolist()
    [[2, 4, 5, 6, 3, 0]]
    """
    folder = os.fspath(preset)
    if is_preset_name(folder):  # online: keras-hub downloads (or has cached) the preset
        folder = fetch_preset_files(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"`preset` {folder!r} is not a folder; pass a folder holding a "
                         "BERT-family checkpoint in Hugging Face format (tokenizer.json or "
                         "vocab.txt), or (online) a keras-hub preset name.")
    tokenizers = _tokenizers()
    json_path, vocab_path, lowercase = _tokenizer_files(folder)
    if os.path.isfile(json_path):
        tok = _json_tokenizer(tokenizers, folder, json_path, vocab_path)
    elif os.path.isfile(vocab_path):
        tok = _wordpiece_tokenizer(tokenizers, folder, vocab_path, lowercase)
    else:
        raise ValueError(f"`preset` {folder!r} has neither tokenizer.json nor vocab.txt; a "
                         "BERT-family checkpoint folder needs one of them.")
    for token in (_PAD, _CLS, "[SEP]"):
        if tok.token_to_id(token) is None:
            raise ValueError(f"`preset` {folder!r}: the tokenizer has no {token!r} token "
                             "(a BERT WordPiece vocabulary has [PAD], [CLS] and [SEP]).")
    if tok.id_to_token(0) != _PAD:
        raise ValueError(f"`preset` {folder!r}: the tokenizer's id 0 must be '[PAD]' (0 is "
                         f"padding); got {tok.id_to_token(0)!r}.")
    return SentenceTokenizer(tok, cls_token=_CLS, id_offset=0, kind="pretrained",
                             sep_token="[SEP]")

def _tokenizer_files(folder: str) -> tuple[str, str, bool]:
    """``(tokenizer.json path, vocabulary path, lowercase)`` of a checkpoint folder; a
    keras-hub preset folder gives no ``tokenizer.json`` path ("") and its WordPiece
    vocabulary with its ``lowercase`` setting."""
    json_path = os.path.join(folder, "tokenizer.json")
    vocab_path = os.path.join(folder, "vocab.txt")
    lowercase = True
    keras_hub_config = _keras_hub_tokenizer_config(json_path)
    if keras_hub_config is not None:  # a keras-hub preset folder: its WordPiece vocabulary
        json_path = ""
        vocab_path = os.path.join(folder, "assets", "tokenizer", "vocabulary.txt")
        lowercase = bool(keras_hub_config.get("lowercase", True))
        if keras_hub_config.get("class_name") != "BertTokenizer" or not os.path.isfile(
                vocab_path):
            raise ValueError(f"`preset` {folder!r}: a keras-hub preset folder needs a "
                             "BertTokenizer with assets/tokenizer/vocabulary.txt; got "
                             f"{keras_hub_config.get('class_name')!r}.")
    return json_path, vocab_path, lowercase


def _json_tokenizer(tokenizers: Any, folder: str, json_path: str, vocab_path: str) -> Any:
    """The ``tokenizers.Tokenizer`` of ``tokenizer.json``, padding and truncation off; a
    ``vocab.txt`` beside it must hold the same vocabulary in the same order."""
    try:
        tok = tokenizers.Tokenizer.from_file(json_path)
    except Exception as err:  # tokenizers raises its own Exception type
        raise ValueError(f"`preset` {folder!r}: tokenizer.json is not a readable "
                         f"tokenizers file ({str(err).splitlines()[0]}).") from None
    tok.no_padding()
    tok.no_truncation()
    if os.path.isfile(vocab_path):
        vocab = _read_vocab_txt(vocab_path)
        while vocab and vocab[-1] == "":
            vocab.pop()
        size = tok.get_vocab_size(with_added_tokens=True)
        first = next((i for i, t in enumerate(vocab) if tok.token_to_id(t) != i), None)
        if len(vocab) != size or first is not None:
            where = ("" if first is None else
                     f"; first difference at id {first}: vocab.txt {vocab[first]!r}, "
                     f"tokenizer.json {tok.id_to_token(first)!r}")
            raise ValueError(f"`preset` {folder!r}: vocab.txt ({len(vocab)} tokens) and "
                             f"tokenizer.json ({size} tokens) must hold the same "
                             f"vocabulary in the same order{where}.")
    return tok


def _wordpiece_tokenizer(tokenizers: Any, folder: str, vocab_path: str, lowercase: bool) -> Any:
    """BERT's WordPiece pipeline over a ``vocab.txt`` (one token a line, id = line number)."""
    from tokenizers import models, normalizers, pre_tokenizers

    vocab = {t: i for i, t in enumerate(_read_vocab_txt(vocab_path)) if t}
    if "[UNK]" not in vocab:
        raise ValueError(f"`preset` {folder!r}: vocab.txt has no '[UNK]' token.")
    tok = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok

