"""Loading an export: its model card, and the encoder as a fine-tunable Keras 3 layer
(images, graph batches or token ids; text exports with a tokenizer also embed strings)."""

from __future__ import annotations

import os

import keras
import numpy as np

from keras_hardneg.data._tf import require_tensorflow_backend

require_tensorflow_backend("keras_hardneg.export (SavedModel export and loading)")

import tensorflow as tf  # noqa: E402  (after the backend check)

from keras_hardneg.export.inspection import parse_saved_model_pb
from keras_hardneg.export.model_card import TOKENIZER_ASSET, ModelCard, load_model_card
from keras_hardneg.modalities import get_modality

__all__ = ["SavedModelEncoder", "load_encoder", "load_model_card"]


def _check_dir(export_dir):
    """Cheap checks before TensorFlow touches the directory. Returns an absolute path."""
    export_dir = os.path.abspath(os.fspath(export_dir))
    if not os.path.exists(export_dir):
        raise FileNotFoundError(f"{export_dir}: no such directory")
    if not os.path.isdir(export_dir):
        raise ValueError(f"{export_dir}: is not a directory")
    if not os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
        raise FileNotFoundError(f"{export_dir}: no saved_model.pb in this directory; "
                                "it is not a SavedModel")
    return export_dir


def _first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def _restore(export_dir):
    """Validated ``tf.saved_model.load``: (restored object, ModelCard)."""
    export_dir = _check_dir(export_dir)
    parse_saved_model_pb(export_dir)
    card = load_model_card(export_dir)
    try:
        obj = tf.saved_model.load(export_dir)
    except Exception as e:  # noqa: BLE001 - TF raises many types; report one line
        raise ValueError(f"{export_dir}: TensorFlow could not load this SavedModel "
                         f"({_first_line(e)})") from None
    from tensorflow.python.util import tf_inspect  # what hub.KerasLayer inspects too

    problems = [f"no attribute {a!r}" for a in
                ("variables", "trainable_variables", "regularization_losses")
                if not hasattr(obj, a)]
    modes = set()
    if not callable(obj) or not hasattr(obj, "__call__"):
        problems.insert(0, "not callable (no __call__)")
    else:
        spec = tf_inspect.getfullargspec(obj.__call__)
        if "training" in spec.args or "training" in spec.kwonlyargs:
            position = spec.args.index("training") if "training" in spec.args else None
            for cf in getattr(obj.__call__, "concrete_functions", []):
                args, kwargs = cf.structured_input_signature
                if "training" in kwargs:
                    modes.add(kwargs["training"])
                elif position is not None and len(args) > position:
                    modes.add(args[position])
        if modes != {True, False}:
            found = sorted(modes) if modes else "no training argument"
            problems.insert(0, "__call__ is not traced for training=True and "
                               f"training=False (found {found})")
    if problems:
        raise ValueError(f"{export_dir}: not a reusable SavedModel encoder: "
                         + "; ".join(problems))
    return obj, card


class _RestoredRegularization:
    """``variable.regularizer`` returning the sum of a SavedModel's regularization losses."""

    def __init__(self, loss_fns):
        self._loss_fns = list(loss_fns)

    def __call__(self, _variable):
        return tf.add_n([tf.cast(fn(), tf.float32) for fn in self._loss_fns])


@keras.saving.register_keras_serializable(package="keras_hardneg")
class SavedModelEncoder(keras.layers.Layer):
    """Keras 3 layer around an exported encoder: inputs -> features ``[B, F]``.

    Inputs by ``modality`` (from the model card): images ``[B, H, W, 3]`` float32;
    a graph batch (a dict with the six tensors ``nodes``, ``edges``, ``node_graph``,
    ``node_mask``, ``edge_mask``, ``graph_mask``; other keys are ignored, ``B`` is the
    length of ``graph_mask``); token ids ``[B, L]`` (cast to int32). A text export that
    ships ``assets/tokenizer.json`` also embeds strings: :meth:`embed_sentences`
    (tokenized in Python with the ``tokenizers`` package, like in training).

    Calls the restored ``__call__(inputs, training=...)``: ``training=True`` only if
    the layer is trainable and called in training mode (like BatchNormalization and
    ``hub.KerasLayer``), in which case batch-norm moving statistics update. The
    SavedModel's variables are this layer's weights (trainable ones trainable, BN
    moving statistics non-trainable), so ``model.fit`` fine-tunes them. The saved
    regularization losses appear in ``layer.losses`` (and the training loss) while the
    layer is trainable.

    Attributes: ``model_card``, ``modality``, ``output_dim``, ``max_length`` (text).

    Example::

        enc = SavedModelEncoder("/tmp/enc")            # or load_encoder("/tmp/enc")
        inp = keras.Input((16, 16, 3))
        model = keras.Model(inp, keras.layers.Dense(10)(enc(inp)))
        load_encoder("/tmp/text").embed_sentences(["a cat", "a dog"])   # [2, F]
    """

    def __init__(self, export_dir, trainable=True, **kwargs):
        super().__init__(trainable=trainable, **kwargs)
        obj, card = _restore(export_dir)
        self.export_dir = os.fspath(export_dir)
        self.model_card = card
        self.modality = card.modality
        self._modality = get_modality(card.modality)
        self.output_dim = card.output_dim
        self.max_length = card.max_length
        self._tokenizer = None
        self._restored = obj
        trainable_ids = {id(v) for v in obj.trainable_variables}
        first_trainable = None
        for v in obj.variables:
            kv = keras.Variable(
                initializer=v,  # wraps the restored tf.Variable itself (no copy)
                trainable=id(v) in trainable_ids,
                dtype=v.dtype,
                shape=v.shape,
                name=v.name.split(":")[0].replace("/", "_"),
            )
            self._track_variable(kv)
            if first_trainable is None and id(v) in trainable_ids:
                first_trainable = kv
        if first_trainable is not None and len(obj.regularization_losses):
            # Keras 3 computes `layer.losses` from `variable.regularizer` of trainable
            # weights; the SavedModel's losses are not tied to variables, so their sum
            # rides on one weight (counted only while the layer is trainable).
            first_trainable.regularizer = _RestoredRegularization(obj.regularization_losses)
        self.built = True

    def call(self, inputs, training=None):
        inputs = self._modality.prepare_export_input(inputs, self.model_card, self.export_dir)
        if not self.trainable or training is None:
            training = False
        if tf.is_tensor(training):
            return tf.cond(training,
                           lambda: self._restored(inputs, training=True),
                           lambda: self._restored(inputs, training=False))
        return self._restored(inputs, training=bool(training))

    def compute_output_shape(self, input_shape):
        return (self._modality.output_batch(input_shape), self.output_dim)

    # ------------------------------------------------------------------ text
    @property
    def tokenizer(self):
        """The export's :class:`keras_hardneg.data.SentenceTokenizer` (text exports with
        ``assets/tokenizer.json``; loaded on first use, needs the ``tokenizers`` package)."""
        if self._tokenizer is None:
            if not self._modality.reads_tokens:
                raise ValueError(f"{self.export_dir}: a {self.modality} encoder has no "
                                 "tokenizer (only exports that read token ids do)")
            path = os.path.join(self.export_dir, "assets", TOKENIZER_ASSET)
            if not os.path.isfile(path):
                raise ValueError(f"{self.export_dir}: this text export ships no tokenizer "
                                 f"(no assets/{TOKENIZER_ASSET}); pass token ids [B, L] "
                                 "to the encoder instead")
            from keras_hardneg.data.tokenizer import load_tokenizer

            try:
                self._tokenizer = load_tokenizer(path)
            except ImportError as e:
                raise ImportError(f"{self.export_dir}: embedding strings needs the "
                                  f"`tokenizers` package ({e})") from None
        return self._tokenizer

    def tokenize(self, sentences):
        """``int32 [n, max_length]`` token ids of ``sentences`` (a list of strings), made
        exactly as in training (``SentenceTokenizer.encode(sentences, max_length)``)."""
        if self.max_length is None:
            raise ValueError(f"{self.export_dir}: the model card records no max_length, so "
                             "strings cannot be encoded as in training")
        return self.tokenizer.encode(sentences, max_length=self.max_length)

    def embed_sentences(self, sentences, batch_size=256):
        """Embeds strings: ``float32 np.ndarray [n, F]`` (inference mode).

        Tokenizes with the export's tokenizer (:meth:`tokenize`) and runs the encoder in
        chunks of ``batch_size`` sentences.

        Raises:
            ValueError: not a text export, no tokenizer asset, or ``sentences`` is not a
                list of strings.
            ImportError: the ``tokenizers`` package is missing.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        ids = self.tokenize(sentences)
        if len(ids) == 0:
            return np.zeros((0, self.output_dim), np.float32)
        chunks = [self._restored(tf.constant(ids[i:i + batch_size]), training=False).numpy()
                  for i in range(0, len(ids), batch_size)]
        return np.concatenate(chunks, axis=0).astype(np.float32)

    def get_config(self):
        # An absolute path: a .keras file that holds this layer loads from any working
        # directory (it stores where the SavedModel is, not the SavedModel itself).
        config = super().get_config()
        config["export_dir"] = os.path.abspath(self.export_dir)
        return config

    @classmethod
    def from_config(cls, config):
        path = config.get("export_dir")
        if path is not None and not os.path.isfile(os.path.join(path, "saved_model.pb")):
            raise ValueError(
                f"SavedModelEncoder: the SavedModel {path!r} that this file refers to is gone "
                "(a .keras file holding a SavedModelEncoder stores the SavedModel's path, not "
                "its weights): put it back there, or load the encoder as a Keras preset "
                "(keras_hardneg.export.load_preset(DIR) or keras_hardneg.zoo.load(NAME)), "
                "whose .keras files are self-contained.")
        return cls(**config)


def load_encoder(export_dir: str | os.PathLike, *, trainable: bool = True,
                 name: str | None = None) -> SavedModelEncoder:
    """Loads an export (image, graph or text) as a Keras 3 layer (see
    :class:`SavedModelEncoder`).

    Raises ``FileNotFoundError`` (missing directory or ``saved_model.pb``) or
    ``ValueError`` (corrupt file, not written by :func:`export_encoder`, missing
    ``__call__(inputs, training)``), each naming the directory.

    Example:

    >>> import os, tempfile, numpy as np, keras_hardneg as khn
    >>> export_dir = os.path.join(tempfile.mkdtemp(), "enc")
    >>> _ = khn.export.export_encoder(khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4),
    ...                               export_dir)
    >>> encoder = khn.export.load_encoder(export_dir, trainable=False)   # a keras.layers.Layer
    >>> tuple(encoder(np.zeros((2, 8, 8, 3), "float32")).shape)          # [B, F]
    (2, 16)

    A text export embeds sentences with its own tokenizer:
    ``load_encoder("text_export").embed_sentences(["a sentence"])`` is ``[1, F]``.
    """
    return SavedModelEncoder(export_dir, trainable=trainable, name=name)
