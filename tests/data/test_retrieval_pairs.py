"""Pair / n-tuple files: both formats read the same rows; each broken rule is one line."""

import json

import pytest

from keras_hardneg.data.retrieval import Pairs, RetrievalFileError, read_pairs, write_pairs


def test_jsonl_and_tsv_read_the_same_rows(tmp_path):
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text(json.dumps({"anchor": "a1", "positive": "p1", "negatives": ["n1", "n2"]})
                     + "\n\n" + json.dumps({"anchor": "a2", "positive": "p2",
                                            "negatives": ["n3", "n4"]}) + "\n")
    tsv = tmp_path / "p.tsv"
    tsv.write_text("anchor\tpositive\tnegative\tnegative\na1\tp1\tn1\tn2\na2\tp2\tn3\tn4\n")
    a, b = read_pairs(jsonl), read_pairs(tsv)
    assert a == b == Pairs(("a1", "a2"), ("p1", "p2"), (("n1", "n2"), ("n3", "n4")))
    assert a.num_negatives == 2 and len(a) == 2


def test_plain_pairs_and_a_single_negative(tmp_path):
    tsv = tmp_path / "p.tsv"
    tsv.write_text("a1\tp1\n")
    assert read_pairs(tsv).num_negatives == 0
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"anchor": "a", "positive": "p", "negative": "n"}\n')
    assert read_pairs(jsonl).negatives == (("n",),)


def test_write_pairs_round_trips(tmp_path):
    path = tmp_path / "out.jsonl"
    write_pairs(path, ["é", "b"], ["p", "q"], [["x"], ["y"]])
    assert read_pairs(path) == Pairs(("é", "b"), ("p", "q"), (("x",), ("y",)))


@pytest.mark.parametrize("name, text, needle", [
    ("p.jsonl", '{"anchor": "a", "positive": "p"}\n{"anchor": "a"', "line 2: not valid JSON"),
    ("p.jsonl", '{"anchor": "a", "positive": "p", "neg": "n"}', "unknown key(s) 'neg'"),
    ("p.jsonl", '{"anchor": "a"}', "line 1: no `positive`"),
    ("p.jsonl", '{"anchor": "a", "positive": ""}', "line 1: the positive is ''"),
    ("p.jsonl", '{"anchor": "a", "positive": "p", "negatives": "n"}', "must be a list"),
    ("p.tsv", "a\tp\tn\na\tp\n", "line 2: 0 negative(s), but line 1 has 1"),
    ("p.tsv", "a\tp\na\t \n", "line 2: the positive is ' '"),
    ("p.tsv", "just one field\n", "line 1: 1 tab-separated field"),
    ("p.tsv", "\n\n", "has no row"),
    ("p.csv", "a,p\n", "extension '.csv'; it must be one of .jsonl, .tsv"),
])
def test_a_broken_pair_file_is_one_line(tmp_path, name, text, needle):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(RetrievalFileError) as err:
        read_pairs(path)
    assert needle in str(err.value) and str(path) in str(err.value)
    assert "\n" not in str(err.value)
