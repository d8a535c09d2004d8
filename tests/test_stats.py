"""Wilson intervals, the host-load columns of timed rows, and the "within noise" marking of tables."""
from __future__ import annotations

import time

import pandas as pd
import pytest

from analysis import tables as T
from fastdllm_core import hostload
from fastdllm_core.intervals import intervals_overlap, wilson, wilson_pct


def test_wilson_matches_known_values_and_edges():
    lo, hi = wilson(50, 100)
    assert (round(lo, 4), round(hi, 4)) == (0.4038, 0.5962)  # the textbook value
    assert wilson(0, 10)[0] == 0.0 and 0.27 < wilson(0, 10)[1] < 0.28  # never a zero-width interval at 0 ...
    assert wilson(10, 10)[1] == 1.0 and 0.72 < wilson(10, 10)[0] < 0.73  # ... or at 100%
    lo, hi = wilson_pct(90.0, 256)
    assert 85 < lo < 90 < hi < 94
    assert wilson_pct(50.0, 1024)[1] - wilson_pct(50.0, 1024)[0] < wilson_pct(50.0, 256)[1] - wilson_pct(50.0, 256)[0]
    assert intervals_overlap((1, 3), (2, 4)) and not intervals_overlap((1, 2), (3, 4))
    with pytest.raises(ValueError, match="n must be a positive integer"):
        wilson(1, 0)
    with pytest.raises(ValueError, match="k must be in"):
        wilson(11, 10)


def test_host_load_sees_a_competitor_and_own_work(monkeypatch):
    stat = iter([(100.0, 1000.0), (103.0, 1004.0)])  # busy +3 s of 2 CPUs x 2 s
    own = iter([10.0, 11.0])  # this process used 1 s of it
    monkeypatch.setattr(hostload, "_proc_stat", lambda: next(stat))
    monkeypatch.setattr(hostload, "_own_cpu", lambda: next(own))
    clock = iter([0.0, 2.0])
    monkeypatch.setattr(hostload.time, "perf_counter", lambda: next(clock))
    h = hostload.HostLoad()
    h.cpus = 2
    with h:
        pass
    s = h.summary()
    assert s["host_other_cpu_frac"] == 0.5 and s["process_cpu_util"] == 0.5 and s["host_busy"] is True


def test_host_load_counts_sibling_ranks_as_own(monkeypatch):
    stat = iter([(0.0, 0.0), (2.0, 4.0)])
    own = iter([0.0, 1.0])
    monkeypatch.setattr(hostload, "_proc_stat", lambda: next(stat))
    monkeypatch.setattr(hostload, "_own_cpu", lambda: next(own))
    clock = iter([0.0, 1.0])
    monkeypatch.setattr(hostload.time, "perf_counter", lambda: next(clock))
    h = hostload.HostLoad(processes=2)
    h.cpus = 2
    with h:
        pass
    assert h.summary()["host_other_cpu_frac"] == 0.0 and h.summary()["host_busy"] is False


def test_host_load_without_proc_stat(monkeypatch):
    monkeypatch.setattr(hostload, "_proc_stat", lambda: None)
    with hostload.HostLoad() as h:
        time.sleep(0.01)
    s = h.summary()
    assert s["host_other_cpu_frac"] == hostload.NOT_AVAILABLE and s["host_busy"] == hostload.NOT_AVAILABLE


def test_table_cells_carry_intervals_and_contrasts_say_within_noise():
    def row(model, v, lo, hi):
        return {"model": model, "task": "t", "metric": "m", "value": v, "ci_low": lo, "ci_high": hi, "status": "ok",
                "mode": "ar"}
    acc = pd.DataFrame([row("a", 50.0, 44.0, 56.0), row("b", 53.0, 47.0, 59.0), row("c", 80.0, 75.0, 85.0)])
    groups = [{"label": x.upper(), "model": x, "paper_row": None, "decode": None} for x in "abc"]
    t = T.comparison_table(name="x", title="x", scale="tiny", paper_table="table1", groups=groups,
                           columns=[{"id": "gsm8k", "title": "G", "task": "t", "metric": "m"}], acc=acc,
                           contrasts=[(0, 1), (0, 2)])
    assert t.rows[0][2] == "50.0 ± 6.0"
    contrast = {r[0]: r[2] for r in t.rows if r[1] == "reproduced difference"}
    assert contrast == {"B - A": "+3.0 (within noise)", "C - A": "+30.0"}
    assert any("within noise" in f for f in t.footnotes)
