"""Checks shared by the tests of committed GPU results (tests/test_gpu_results.py, tests/test_gpu_static_results.py):
a bench CSV's rows name their GPU and versions and measure energy with the NVML counter, and a plot script draws its
figure from a results folder."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def assert_rows_name_gpu_and_measure_energy(df: pd.DataFrame) -> None:
    assert len(df) > 0 and (df["device_type"] == "cuda").all()
    assert df["device_name"].str.startswith("NVIDIA").all() and df["gpu_driver"].notna().all()
    for col in ("torch_version", "transformers_version", "git_commit", "n_params"):
        assert df[col].notna().all(), col
    assert (df["energy_method"] == "energy_counter").all()
    assert ((df["joules_per_token"] > 0) & (df["peak_mem_mib"] > 0) & (df["tokens_per_s"] > 0)).all()


def assert_plot_draws(script: str, results: Path, tmp_path: Path) -> None:
    """``scripts/gpu/<script> --results <results> --out <tmp>/fig`` exits 0 and writes a non-trivial PNG."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu" / script), "--results", str(results),
                        "--out", str(tmp_path / "fig")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "fig.png").stat().st_size > 10_000
