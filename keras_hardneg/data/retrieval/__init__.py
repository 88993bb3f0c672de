"""Retrieval data: a BEIR folder (corpus, queries, relevance judgements) and plain pair /
n-tuple files, read with checks that name the file, the line and what is allowed.

* :func:`load_beir` -> :class:`RetrievalSplit` (:class:`Corpus`, :class:`Queries`, qrels
  ``{query_id: {doc_id: score}}``); :func:`read_corpus`, :func:`read_queries`,
  :func:`read_qrels`, :func:`beir_splits` for the single files (:mod:`.beir`).
* :func:`read_pairs` -> :class:`Pairs`; :func:`write_pairs` (:mod:`.pairs`).
* :func:`beir_dataset` -> :class:`RetrievalData`: the ``"beir"`` dataset of a recipe
  (``modality="retrieval"``), tokenized (:mod:`.source`).
* :class:`RetrievalFileError` (a ``ValueError``): what every check raises.
"""

from keras_hardneg.data.retrieval._lines import RetrievalFileError
from keras_hardneg.data.retrieval.beir import (Corpus, Queries, RetrievalSplit, beir_splits,
                                               load_beir, read_corpus, read_qrels, read_queries)
from keras_hardneg.data.retrieval.pairs import PAIR_FORMATS, Pairs, read_pairs, write_pairs
from keras_hardneg.data.retrieval.source import RetrievalData, beir_dataset

__all__ = ["beir_dataset", "Corpus", "PAIR_FORMATS", "Pairs", "Queries", "RetrievalData",
           "RetrievalFileError", "RetrievalSplit", "beir_splits", "load_beir", "read_corpus", "read_pairs", "read_qrels", "read_queries",
           "write_pairs"]
