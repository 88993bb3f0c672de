"""benchmarks/retrieval_zero_shot.py: the length-sorted encoding returns rows in the input
order, and a stopped run resumes from the batches it saved (the encoder is faked)."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import retrieval_zero_shot as bench  # noqa: E402


class _Tokenizer:
    def encode(self, texts, max_length):  # ids: one per word, 0 padding
        out = np.zeros((len(texts), max_length), np.int32)
        for i, text in enumerate(texts):
            ids = [len(w) for w in text.split()][:max_length]
            out[i, :len(ids)] = ids
        return out


class _Encoder:
    output_shape = (None, 2)

    def __init__(self, fail_after=None):
        self.calls, self.fail_after = 0, fail_after

    def __call__(self, ids, training=False):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise KeyboardInterrupt("stopped")
        ids = np.asarray(ids)  # [B, L]: (number of tokens, sum of ids)
        return np.stack([(ids != 0).sum(1), ids.sum(1)], axis=1).astype("float32")


def test_rows_come_back_in_input_order_and_a_stopped_run_resumes(tmp_path):
    texts = ["a bb ccc dddd", "e", "ff gg", "h i j k l m", "nn", "o p q"]
    want = np.array([[len(t.split()), sum(len(w) for w in t.split())] for t in texts],
                    "float32")
    with pytest.raises(KeyboardInterrupt):
        bench.encode(texts, _Encoder(fail_after=1), _Tokenizer(), 8, 2, "t", str(tmp_path))
    assert len(os.listdir(tmp_path)) == 1  # one batch of 2 saved
    encoder = _Encoder()
    out, seconds = bench.encode(texts, encoder, _Tokenizer(), 8, 2, "t", str(tmp_path))
    np.testing.assert_array_equal(out, want)
    assert encoder.calls == 2 and seconds is None  # resumed: 2 of 3 batches encoded
    out, _ = bench.encode(texts, _Encoder(fail_after=0), _Tokenizer(), 8, 2, "t",
                          str(tmp_path))
    np.testing.assert_array_equal(out, want)  # all cached: nothing encoded
