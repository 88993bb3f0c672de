"""keras_hardneg.zoo_figures: figures over seeds, the NT-Xent twin, the comparison rows."""

import math

import pytest

from keras_hardneg import zoo_figures as zf


def test_summarize_is_the_mean_and_sample_std_over_seeds():
    s = zf.summarize({"0": 0.5, "1": 0.7, "2": 0.6})
    assert s["mean"] == pytest.approx(0.6) and s["n"] == 3
    assert s["std"] == pytest.approx(0.1)  # ddof=1, as the benchmark grids report
    assert s["per_seed"] == {"0": 0.5, "1": 0.7, "2": 0.6}
    one = zf.summarize({0: 0.5})
    assert one["std"] is None and one["n"] == 1 and one["per_seed"] == {"0": 0.5}
    with pytest.raises(ValueError, match="per_seed"):
        zf.summarize({})


def test_run_metrics_reads_each_modality():
    assert zf.run_metrics({"svm_accuracy": 0.8, "svm_accuracy_std": 0.1}) == {
        "svm_accuracy": 0.8}
    assert zf.run_metrics({"sts": {"avg": 80.0, "STS12": 1.0}, "senteval": {"avg": 82.0}}) == {
        "sts_avg": 80.0, "senteval_avg": 82.0}
    assert zf.run_metrics({"knn_accuracy": 0.7, "linear_probe_accuracy": 0.75}) == {
        "knn_accuracy": 0.7, "linear_probe_accuracy": 0.75}


def test_entry_metrics_over_seeds_else_the_one_run():
    seeds = {"seeds": {"per_seed": {"0": {"svm_accuracy": 0.8}, "1": {"svm_accuracy": 0.9}}},
             "svm_accuracy": 0.8}
    m = zf.entry_metrics(seeds)
    assert m["svm_accuracy"]["n"] == 2 and m["svm_accuracy"]["mean"] == pytest.approx(0.85)
    single = zf.entry_metrics({"knn_accuracy": 0.4}, seed=3)
    assert single == {"knn_accuracy": {"mean": 0.4, "std": None, "n": 1,
                                       "per_seed": {"3": 0.4}}}


def test_inside_the_spread_is_a_difference_no_larger_than_either_seed_std():
    a = zf.summarize({"0": 0.80, "1": 0.82, "2": 0.84})  # std 0.02
    b = zf.summarize({"0": 0.79, "1": 0.80, "2": 0.81})  # std 0.01
    c = zf.compare_summaries(a, b)
    assert c["difference"] == pytest.approx(0.02) and c["spread"] == pytest.approx(0.02)
    assert c["inside_spread"] is True
    far = zf.compare_summaries(zf.summarize({"0": 0.90, "1": 0.91}), b)
    assert far["inside_spread"] is False and far["difference"] == pytest.approx(0.105)
    assert zf.compare_summaries(zf.summarize({"0": 0.9}), b)["inside_spread"] is None
    assert "inside the spread (± 2.00)" in zf.verdict("svm_accuracy", c)
    assert zf.verdict("svm_accuracy", far).startswith("+10.50, outside the spread")
    assert "no spread" in zf.verdict("sts_avg", {"difference": 0.5, "inside_spread": None})


@pytest.mark.parametrize("name,twin", [
    ("graphcl-hard-mutag", "graphcl-ntxent-mutag"),
    ("graphcl-hard-batchsampler-nci1", "graphcl-ntxent-nci1"),
    ("graphcl-ntxent-batchsampler-mutag", "graphcl-ntxent-mutag"),
    ("simcse-minilm-hard-wiki", "simcse-minilm-ntxent-wiki"),
    ("simclr-debiased-cifar100", "simclr-ntxent-cifar100"),
    ("graphcl-ntxent-mutag", None),
    ("quickthought-ntxent-wiki", None),
])
def test_twin_candidate_follows_the_zoo_names(name, twin):
    assert zf.twin_candidate(name) == twin


def _record(per_seed, twin=None, status="weights", twin_what=None):
    results = {"seeds": {"per_seed": {s: {"svm_accuracy": v} for s, v in per_seed.items()}},
               "baseline": {"what": "random GIN", "per_seed": {"0": {"svm_accuracy": 0.6}}}}
    if twin:
        results["twin"] = twin
    if twin_what:
        results["twin_what"] = twin_what
    return {"status": status, **zf.index_fields(results, {"seed": 0, "loss": {"name": "x"}})}


def test_link_twins_by_name_or_by_the_entry_s_own_word():
    records = {"graphcl-ntxent-a": _record({"0": 0.80, "1": 0.82}),
               "graphcl-hard-a": _record({"0": 0.81, "1": 0.84}),
               "odd-name": _record({"0": 0.70, "1": 0.71}, twin="graphcl-ntxent-a"),
               "graphcl-hard-b": _record({"0": 0.5}),  # its twin has no entry
               "graphcl-ring-a": {"status": "recipe"}}
    zf.link_twins(records)
    t = records["graphcl-hard-a"]["twin"]
    assert t["name"] == "graphcl-ntxent-a" and t["metric"] == "svm_accuracy"
    assert t["difference"] == pytest.approx(0.015) and t["inside_spread"] is True
    assert records["odd-name"]["twin"]["inside_spread"] is False
    assert records["graphcl-hard-b"]["twin"] is None
    assert records["graphcl-ntxent-a"]["twin"] is None
    assert sorted(records["graphcl-ntxent-a"]["twinned_by"]) == ["graphcl-hard-a", "odd-name"]
    assert all("twin_name" not in r for r in records.values())
    assert records["graphcl-hard-a"]["baseline"]["metrics"]["svm_accuracy"]["mean"] == 0.6
    zf.link_twins(records)  # idempotent: twinned_by is rebuilt, not appended to
    assert len(records["graphcl-ntxent-a"]["twinned_by"]) == 2


def test_a_twin_names_what_it_differs_by():
    records = {"a-inbatch": _record({"0": 0.67, "1": 0.68}),
               "a-mined": _record({"0": 0.70, "1": 0.71}, twin="a-inbatch",
                                  twin_what="in-batch-only"),
               "graphcl-ntxent-a": _record({"0": 0.80, "1": 0.82}),
               "graphcl-hard-a": _record({"0": 0.81, "1": 0.84})}
    zf.link_twins(records)
    assert records["a-mined"]["twin"]["what"] == "in-batch-only"
    assert records["graphcl-hard-a"]["twin"]["what"] == zf.DEFAULT_TWIN == "NT-Xent"
    assert all("twin_what" not in r for r in records.values())
    zf.link_twins(records)  # from the index again: the word is kept
    assert records["a-mined"]["twin"]["what"] == "in-batch-only"
    assert zf.twin_label("in-batch-only") == "in-batch-only twin"
    assert zf.twin_label(None) == "NT-Xent twin"


def test_compare_records_rows_side_by_side():
    a = {**_record({"0": 0.81, "1": 0.84}), "name": "graphcl-hard-a"}
    b = {**_record({"0": 0.80, "1": 0.82}), "name": "graphcl-ntxent-a"}
    a["setting"]["loss"] = {"name": "hard", "beta": 1.0}
    table = zf.compare_records(a, b)
    assert table["names"] == ("graphcl-hard-a", "graphcl-ntxent-a")
    loss = [r for r in table["setting"] if r[0] == "loss"][0]
    assert loss[1] == "hard (beta 1.0)" and loss[3] == "differs"
    label, va, vb, note = table["metrics"][0]
    assert label.startswith("SVM accuracy") and va == "82.50 ± 2.12 (2)"
    assert vb == "81.00 ± 1.41 (2)" and note.startswith("+1.50, inside the spread")
    assert [r[0].strip() for r in table["metrics"][1:]] == ["seed 0", "seed 1"]
    assert table["baseline"][0][1] == "60.00 (1)"
    assert not math.isnan(float(table["metrics"][1][1]))
