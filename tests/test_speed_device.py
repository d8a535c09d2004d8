"""Every speed figure names the device its speeds were measured on, from the rows' device_type / device_name
(issue 24)."""
import pandas as pd
import pytest

from analysis import fig_speed, fig_sweeps
from analysis.plotting import measured_on

DEV = "NVIDIA H100 80GB HBM3"


def _thr():
    rows = []
    for b in (1, 4, 32):
        rows.append(dict(model="ar", mode="ar", batch_size=b, tokens_per_s=10.0 * b, device_type="cuda",
                         device_name=DEV, sweep="s"))
        for sb, th in ((8, 0.9), (8, 1.0), (4, 0.9)):
            rows.append(dict(model="bd", mode="bd", batch_size=b, tokens_per_s=20.0 * b, block_size=32,
                             sub_block_size=sb, threshold=th, use_sub_block_cache=False, device_type="cuda",
                             device_name=DEV, sweep="s"))
    rows.append(dict(model="bd", mode="bd", batch_size=1, tokens_per_s=5.0, block_size=32, sub_block_size=8,
                     threshold=0.9, use_sub_block_cache=False, device_type="cpu", device_name="Other CPU",
                     sweep="other"))
    return pd.DataFrame(rows)


def _acc():
    return pd.DataFrame([dict(model=m, task="t", metric="acc", value=40.0, status="ok", mode=m, block_size=32,
                              sub_block_size=8, threshold=th, use_sub_block_cache=False)
                         for m in ("ar", "bd") for th in (0.9, 1.0)])


@pytest.fixture
def texts(monkeypatch):
    """Every title, suptitle and text of the figures saved (captured before they are closed)."""
    out = []

    def capture(fig, png, pdf):
        out.append(" ".join([fig._suptitle.get_text() if fig._suptitle else ""] + [t.get_text() for t in fig.texts]
                            + [ax.get_title() for ax in fig.axes]))

    monkeypatch.setattr(fig_speed, "save", capture)
    monkeypatch.setattr(fig_sweeps, "save", capture)
    return out


DEC = dict(block_size=32, sub_block_size=8, threshold=0.9, use_sub_block_cache=False)
MODELS = [{"model": "bd", "label": "BD", "mode": "bd"}, {"model": "ar", "label": "AR", "mode": "ar"}]


def test_speed_figures_name_the_device(texts, tmp_path):
    thr, acc, f = _thr(), _acc(), (tmp_path / "f.png", tmp_path / "f.pdf")
    fig_speed.fig1a_throughput_vs_accuracy(acc, thr, {"models": MODELS, "bd_reference": "bd", "ar_reference": "ar",
                                                      "task": "t", "metric": "acc", "speed_decode": DEC,
                                                      "sweep": "s"}, "paper", *f)
    fig_speed.fig1b_throughput_batch(thr, {"models": MODELS, "batches": [1, 4], "speed_decode": DEC, "sweep": "s"},
                                     "paper", *f)
    fig_sweeps.fig_threshold_gsm8k(acc, thr, {"model": "bd", "task": "t", "metric": "acc", "thresholds": [0.9, 1.0],
                                              "decode": DEC, "batch": 1, "sweep": "s"}, "paper", *f)
    fig_sweeps.fig_subblock_throughput(thr, {"model": "bd", "sub_blocks": [4, 8], "caches": [False],
                                             "batches": [1, 32], "decode": DEC, "sweep": "s"}, "paper", *f)
    assert len(texts) == 4
    for t in texts:
        assert f"measured on {DEV} (cuda)" in t.replace("\n", " ")
        assert "Other CPU" not in t  # only the figure's own sweep


def test_measured_on_lists_every_device_and_says_when_unrecorded():
    thr = _thr()
    assert measured_on(thr) == f"measured on {DEV} (cuda); Other CPU (cpu)"
    assert measured_on(thr, "other") == "measured on Other CPU (cpu)"
    assert measured_on(thr.drop(columns=["device_name"])) == "device not recorded"
    assert measured_on(pd.DataFrame()) == "device not recorded"


def test_training_table_and_summary_name_the_device():
    from analysis import tables as T
    from analysis.summary import _timing

    train = pd.DataFrame([dict(model="m", recipe="r", step=1, loss=1.0, tokens_seen=10, tokens_per_s=100.0,
                               device_type="cpu", device_name="Intel Xeon")])
    assert any("measured on Intel Xeon (cpu)" in n for n in T.training_table(train, "tiny").notes)
    spec = {"speed": {"models": [{"label": "BD", "source": "bd", "mode": "bd", "decode": DEC}], "batches": [1],
                      "sweep": "s", "note": "n"}}
    thr = _thr().assign(tokens_per_forward=1.5)
    text = "\n".join(_timing(spec, thr, train, []))
    assert f"measured on {DEV} (cuda)" in text and "measured on Intel Xeon (cpu)" in text
