"""Datasets in the library's element format: images float32 ``[B, H, W, 3]`` in ``[0, 1]``
and labels int64 ``[B]``.

* :func:`load_digits`: the embedded default dataset (scikit-learn digits, no download).
* :func:`image_folder` / :func:`load_image_folder_arrays`: ``root/<class>/<image>`` folders.
* :class:`ShuffledBatches`: shuffled batches of arrays as a ``keras.utils.PyDataset``
  (the uniform feed without TensorFlow).
* :func:`tfds_dataset`: a prepared TensorFlow Datasets dataset (TensorFlow, imported on call).
* :mod:`sources`: the datasets a recipe can name; :func:`dataset_spec` parses ``--dataset``,
  :func:`load_dataset` loads one.
* :mod:`public`: datasets by name fetched once into ``~/.keras/datasets``
  (:func:`load_cifar`, TU sets, BEIR retrieval sets, SimCSE's sentences; :mod:`fetch`:
  the cache and the host).
* :mod:`text`: sentence files as token ids (:class:`TokenizedSentences`, the ``text_file``
  source); :mod:`tokenizer`: :func:`train_tokenizer`, :func:`load_tokenizer`,
  :func:`wordllama_start` (the ``tokenizers`` package, imported on use).
* :func:`load_tu` / :class:`GraphSet` / :func:`pad_graphs`: TU graph-classification folders
  and padded graph batches (:mod:`keras_hardneg.data.graphs`, dataset ``"tu"``).
* :mod:`retrieval`: a BEIR folder (:func:`load_beir`: corpus, queries, relevance judgements)
  and (anchor, positive, negatives) pair files (:func:`read_pairs`, :func:`write_pairs`).
"""

from keras_hardneg.data._tf import TensorFlowBackendRequiredError, TensorFlowRequiredError
from keras_hardneg.data.batches import ShuffledBatches
from keras_hardneg.data.digits import load_digits
from keras_hardneg.data.graphs import GraphSet, is_tu_folder, load_tu, pad_graphs
from keras_hardneg.data.image_folder import (
    IMAGE_EXTENSIONS,
    ImageFolderReport,
    image_folder,
    list_image_files,
    load_image_folder_arrays,
    scan_image_folder,
)
from keras_hardneg.data.public import load_cifar
from keras_hardneg.data.retrieval import load_beir, read_pairs, write_pairs
from keras_hardneg.data.sources import dataset_spec, load_dataset
from keras_hardneg.data.text import TokenizedSentences, read_sentences, text_file
from keras_hardneg.data.tfds_loader import tfds_dataset, to_rgb_float
from keras_hardneg.data.tokenizer import (SentenceTokenizer, load_tokenizer, pretrained_tokenizer,
                                          train_tokenizer, wordllama_available, wordllama_start)

__all__ = [
    "TensorFlowBackendRequiredError",
    "TensorFlowRequiredError",
    "dataset_spec",
    "load_beir",
    "load_cifar",
    "load_dataset",
    "GraphSet",
    "IMAGE_EXTENSIONS",
    "ImageFolderReport",
    "image_folder",
    "is_tu_folder",
    "list_image_files",
    "load_digits",
    "load_image_folder_arrays",
    "load_tu",
    "pad_graphs",
    "scan_image_folder",
    "read_pairs",
    "read_sentences",
    "SentenceTokenizer",
    "ShuffledBatches",
    "text_file",
    "tfds_dataset",
    "to_rgb_float",
    "TokenizedSentences",
    "load_tokenizer",
    "pretrained_tokenizer",
    "train_tokenizer",
    "wordllama_available",
    "wordllama_start",
    "write_pairs",
]
