"""The committed static-decode-path results (results/gpu/static, issue 40): every row names its GPU and versions and
measures energy with the NVML counter, the README's speed table and the claims it makes are the CSVs' numbers, the
captured path gave the eager path's tokens in fp32, and the figure is a function of the CSVs."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpu_results_checks import assert_plot_draws, assert_rows_name_gpu_and_measure_energy

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "results" / "gpu" / "static"
ROWS = sorted(p for p in STATIC.glob("static_*.csv") if not p.name.endswith("_roofline.csv"))
SHAPES = ("1.5b", "7b")

pytestmark = pytest.mark.skipif(not ROWS, reason="no committed static-path GPU results")


def _joined(shape: str) -> pd.DataFrame:
    """The bench rows of one shape with their roofline columns (same row order: the roofline CSV is written from
    the bench CSV row by row)."""
    bench = pd.read_csv(STATIC / f"static_qwen2.5-{shape}.csv")
    roof = pd.read_csv(STATIC / f"static_qwen2.5-{shape}_roofline.csv")
    assert len(bench) == len(roof)
    key = ["mode", "decode_path", "batch_size"]
    assert (bench[key].values == roof[key].values).all()
    for col in ("time_per_forward_s", "fraction_of_roofline"):
        bench[col] = roof[col].values
    return bench


def _table_row(shape: str, batch: int) -> str:
    d = _joined(shape)
    g = d[d["batch_size"] == batch].set_index(["mode", "decode_path"])
    v = lambda mode, path, col: g.loc[(mode, path), col]  # noqa: E731
    tps = {(m, p): v(m, p, "tokens_per_s") for m in ("ar", "bd") for p in ("eager", "static")}
    paths = [("ar", "eager"), ("ar", "static"), ("bd", "eager"), ("bd", "static")]
    bds, bde, ars = tps[("bd", "static")], tps[("bd", "eager")], tps[("ar", "static")]
    ms = [1e3 * v("bd", p, "time_per_forward_s") for p in ("eager", "static")]
    roof = [100 * v(m, "static", "fraction_of_roofline") for m in ("ar", "bd")]
    cells = [shape.upper(), str(batch)] + [f"{tps[k]:.1f}" for k in paths]
    cells += [f"{bds / bde:.2f}x", f"{bds / ars:.2f}x", f"{ms[0]:.1f} / {ms[1]:.1f}",
              f"{roof[0]:.1f}% / {roof[1]:.1f}%",
              " / ".join(f"{v(m, p, 'joules_per_token'):.2f}" for m, p in paths)]
    return "| " + " | ".join(cells) + " |"


@pytest.mark.parametrize("path", ROWS, ids=[p.name for p in ROWS])
def test_every_row_names_its_gpu_and_versions_and_measures_energy(path):
    df = pd.read_csv(path)
    assert_rows_name_gpu_and_measure_energy(df)
    captured = df[df["decode_path"] == "static"]
    assert len(captured) and (captured["capture_time_s"] > 0).all()  # graphs were captured, and timed apart


@pytest.mark.parametrize("shape", SHAPES)
def test_the_readme_table_is_the_csvs(shape):
    text = (STATIC / "README.md").read_text()
    for batch in sorted(set(pd.read_csv(STATIC / f"static_qwen2.5-{shape}.csv")["batch_size"])):
        row = _table_row(shape, batch)
        assert row in text, row


def test_captured_gives_the_eager_tokens_in_fp32():
    d = pd.read_csv(STATIC / "static_real_qwen2.5-1.5b_float32.csv")
    static = d[d["decode_path"] == "static"]
    assert len(static) >= 3 and (static["eager_agreement"] == 1.0).all()
    assert "1.000 for AR static and for block" in (STATIC / "README.md").read_text()


def test_the_goals_quoted_are_the_csvs():
    text = (STATIC / "README.md").read_text()
    small, large = _joined("1.5b"), _joined("7b")
    def bd(d, path, b):
        return d[(d["mode"] == "bd") & (d["decode_path"] == path) & (d["batch_size"] == b)].iloc[0]

    ratio = bd(small, "static", 1)["tokens_per_s"] / bd(small, "eager", 1)["tokens_per_s"]
    assert f"met at batch 1 ({ratio:.2f}x)" in text
    assert f"not met ({100 * bd(large, 'static', 1)['fraction_of_roofline']:.1f} %)" in text


def test_the_figure_is_drawn_from_the_csvs(tmp_path):
    assert_plot_draws("plot_static.py", STATIC, tmp_path)
