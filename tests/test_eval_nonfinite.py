"""An evaluation never scores a model whose numbers are not finite: NaN weights give one failed row before any
item runs, non-finite logits met while decoding turn every metric row into a failed row with its reason."""
from __future__ import annotations

import csv

import pytest
import torch

from conftest import tiny_eval_setup
from fastdllm_core.decoding import DecodeConfig
from fastdllm_core.evaluation import run_task
from fastdllm_core.evaluation.finite import LogitWatch, failed_rows, nonfinite_weights

pytestmark = pytest.mark.usefixtures("hub_offline")
DEC = DecodeConfig(block_size=8, sub_block_size=4, max_new_tokens=8)


@pytest.fixture
def setup(tmp_path_factory):
    return tiny_eval_setup(tmp_path_factory, "nonfinite", n_eval=2)


def _score(model, suite, out):
    rows = run_task(model, "synth_arith", decode=DEC, batch_size=2, limit=2, out_dir=out,
                    data_path=suite["synth_arith_test"], model_label="tiny")
    with open(out / "accuracy.csv") as fh:
        return rows, list(csv.DictReader(fh))


def test_nan_weights_are_a_failed_row_not_a_score(setup, tmp_path):
    model, suite, _ = setup
    with torch.no_grad():
        model.model.model.norm.weight[0] = float("nan")
    rows, written = _score(model, suite, tmp_path)
    assert [r["status"] for r in written] == ["failed"] and written[0]["value"] == ""
    assert "non-finite weights in 1 parameters (first: model.norm.weight)" in written[0]["note"]


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
def test_non_finite_logits_turn_every_metric_into_a_failed_row(setup, tmp_path):
    model, suite, _ = setup
    hook = model.model.model.norm.register_forward_hook(lambda m, a, out: out * float("inf"))
    try:
        rows, written = _score(model, suite, tmp_path)
    finally:
        hook.remove()
    assert len(written) >= 2 and {r["status"] for r in written} == {"failed"}
    assert all(r["value"] == "" and "non-finite logits" in r["note"] for r in written)
    rows, written = _score(model, suite, tmp_path / "again")  # the hook gone: scored as usual
    assert {r["status"] for r in written} == {"ok"}


def test_the_watch_reads_its_flag_once_and_detaches():
    lin = torch.nn.Linear(2, 2)
    with LogitWatch(lin) as w:
        lin(torch.ones(1, 2))
        assert not w.met()
        lin(torch.tensor([[float("nan"), 0.0]]))
        lin(torch.ones(1, 2))
        assert w.met()
    assert not lin._forward_hooks
    assert nonfinite_weights(lin) == []
    assert failed_rows([{"metric": "acc", "value": 1.0, "n": 2}], "why") == [
        {"metric": "acc", "value": "", "n": 2, "status": "failed", "note": "why"}]
