"""The committed GPU results (results/gpu): every row carries its device and provenance, energy comes from the NVML
energy counter, the figure is a function of the CSVs, and the numbers results/gpu/README.md quotes are the CSVs'."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from gpu_results_checks import assert_plot_draws, assert_rows_name_gpu_and_measure_energy

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "results" / "gpu"
BENCH = sorted(p for p in GPU.glob("bench_*.csv") if not p.name.endswith("_roofline.csv"))

pytestmark = pytest.mark.skipif(not BENCH, reason="no committed GPU results")


def _bench(shape: str) -> pd.DataFrame:
    return pd.read_csv(GPU / f"bench_qwen2.5-{shape}_random.csv")


@pytest.mark.parametrize("path", BENCH, ids=[p.name for p in BENCH])
def test_every_row_names_its_gpu_and_versions_and_measures_energy(path):
    assert_rows_name_gpu_and_measure_energy(pd.read_csv(path))


def test_the_readme_quotes_the_csvs():
    text = (GPU / "README.md").read_text()
    d = _bench("1.5b")
    ar1 = d[(d["mode"] == "ar") & (d["batch_size"] == 1)].iloc[0]
    bd = d[(d["mode"] == "bd") & (d["use_sub_block_cache"] == False)]  # noqa: E712
    k4 = bd[(bd["batch_size"] == 1) & (bd["forced_k"] == 4)].iloc[0]
    roof = pd.read_csv(GPU / "bench_qwen2.5-1.5b_random_roofline.csv")
    frac = roof[(roof["mode"] == "ar") & (roof["batch_size"] == 1)].iloc[0]["fraction_of_roofline"]
    ar7 = _bench("7b").query("mode == 'ar'").iloc[0]["tokens_per_s"]
    quoted = [f"{ar1['tokens_per_s']:.1f}", f"{k4['tokens_per_s']:.1f} ({k4['speedup_vs_ar']:.2f}x)",
              f"{100 * frac:.1f} % of the bandwidth roofline", f"{ar1['joules_per_token']:.2f}",
              f"{ar7:.1f} at 7B"]
    for q in quoted:
        assert q in text, q


def test_the_figure_is_drawn_from_the_csvs(tmp_path):
    assert_plot_draws("plot_batch_throughput.py", GPU, tmp_path)


def test_the_static_session_fits_one_device_call_and_refuses_a_plan_that_does_not(tmp_path):
    """static_session.sh: its default PLAN's limits add up to at most 560 s (the device tool runs a command for at
    most 600 s); a longer or malformed PLAN is refused, naming it, before any step runs."""
    import re

    text = (ROOT / "scripts" / "gpu" / "static_session.sh").read_text()
    plan = re.search(r'PLAN=\$\{PLAN:-"([^"]+)"\}', text).group(1)
    assert 400 <= sum(int(item.split(":")[1]) for item in plan.split()) <= 560
    assert plan.split()[4].startswith("compiled7:")  # the 7B's goal before the 1.5B's
    for plan, msg in (("env:400 tests:300", "the PLAN's limits add up to 700 s, over MAX_S=560 s"),
                      ("env:x", "step limit 'env:x' is not step:seconds")):
        r = subprocess.run(["bash", str(ROOT / "scripts" / "gpu" / "static_session.sh")], capture_output=True,
                           text=True, env={**os.environ, "OUT": str(tmp_path / "out"), "PLAN": plan}, cwd=ROOT)
        assert r.returncode == 2 and msg in r.stderr
        assert not (tmp_path / "out" / "steps.tsv").exists()  # nothing ran


@pytest.mark.parametrize("script", ["run_gpu_session.sh", "quick_session.sh", "static_session.sh", "make_wheels.sh"])
def test_the_session_scripts_parse(script):
    r = subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu" / script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
