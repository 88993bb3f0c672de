"""The texts form end to end: a keras-hub TextEmbedder (a tiny random BERT, not MiniLM) trains
on the tf.data tuple feed with a tuple loss, and ReminingCallback re-mines with the embedder's
own predict (its preprocessor tokenizes the strings). Heavy tier (about a minute of CPU:
the string predict compiles) and skipped without keras-hub."""

import numpy as np
import pytest

pytestmark = pytest.mark.heavy

K = 1


def test_text_embedder_trains_on_the_texts_feed_and_remines():
    keras_hub = pytest.importorskip("keras_hub")
    pytest.importorskip("tensorflow")
    import keras

    from keras_hardneg.callbacks import ReminingCallback
    from keras_hardneg.sampling import TupleBatches, make_tuple_dataset

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(40)]
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=words)
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(tokenizer, sequence_length=8)
    backbone = keras_hub.models.BertBackbone(vocabulary_size=len(words), num_layers=1,
                                             num_heads=1, hidden_dim=8, intermediate_dim=16,
                                             max_sequence_length=8)
    embedder = keras_hub.models.BertTextEmbedder(backbone=backbone, preprocessor=preprocessor)
    rng = np.random.default_rng(0)
    docs = [" ".join(f"w{j}" for j in rng.integers(0, 40, 5)) for _ in range(40)]
    queries = [" ".join(d.split()[:3]) for d in docs[:16]]
    batches = TupleBatches((np.arange(16), np.arange(16), (16 + np.arange(16))[:, None]), 4)

    class TupleLoss(keras.losses.Loss):  # queries against every document of the batch
        def call(self, y_true, y_pred):
            d = y_pred.shape[-1]
            e = keras.ops.reshape(y_pred, (-1, 2 + K, d))
            docs_ = keras.ops.reshape(e[:, 1:], (-1, d))
            s = keras.ops.matmul(e[:, 0], keras.ops.transpose(docs_)) / 0.05
            labels = keras.ops.arange(keras.ops.shape(s)[0]) * (1 + K)
            return keras.losses.sparse_categorical_crossentropy(labels, s, from_logits=True)

    remine = ReminingCallback(batches, queries, docs, [[i] for i in range(16)], batch_size=16,
                              mining_options={"range_max": 5})
    embedder.compile(loss=TupleLoss())
    history = embedder.fit(make_tuple_dataset(batches, queries, docs), epochs=2,
                           callbacks=[remine], verbose=0)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    assert history.history["mining/tuples"] == [16.0] and batches.version == 1
