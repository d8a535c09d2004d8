"""The Snakemake DAG: config validation, dry runs of paper_figures (default and paper config), lint, rerun
granularity, GPU checks, and (slow) an end-to-end run of config/ci.yaml."""
import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))
import dagconfig as dc  # noqa: E402


def smk(*args, timeout=300):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def default_config():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_dry_run_default(tmp_path):
    r = smk("paper_figures", "-n", "--nolock", "--cores", "2", "--config", f"results_dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    for rule in ("train_model", "evaluate", "bench", "table1_main", "fig_attention_masks", "case_study"):
        assert rule in out


def test_dry_run_paper_config(tmp_path):
    r = smk("paper_figures", "-n", "--nolock", "--cores", "2", "--configfile", "config/paper.yaml", "--config",
            f"results_dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    assert "gpu_batch" in out and "fig_gpu_batch_throughput" in out


def test_lint_is_clean():
    r = smk("--lint", "--nolock", timeout=200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Lints for" not in r.stdout + r.stderr


def test_invalid_value_fails_at_parse_time_naming_the_field(tmp_path):
    r = smk("-n", "--nolock", "--cores", "1", "--config", "speed_threshold=1.5", f"results_dir={tmp_path}")
    assert r.returncode != 0
    assert "speed_threshold" in r.stdout + r.stderr


def test_semantic_checks_name_the_field():
    cfg = default_config()
    bad = copy.deepcopy(cfg)
    bad["decode"]["sub_block_size"] = 5
    with pytest.raises(dc.ConfigError, match="decode.sub_block_size"):
        dc.check(bad)
    bad = copy.deepcopy(cfg)
    bad["roles"]["main_bd"] = "ar_base"
    with pytest.raises(dc.ConfigError, match="roles.main_bd"):
        dc.check(bad)
    bad = copy.deepcopy(cfg)
    bad["tables"]["table3"]["sub_blocks"] = [3]
    with pytest.raises(dc.ConfigError, match="tables.table3.sub_blocks"):
        dc.check(bad)
    dc.check(cfg)


def test_gpu_job_fails_clearly_without_cuda(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="no CUDA device"):
        dc.require_device({"gpu": True, "device": "cuda"})
    assert dc.require_device({"gpu": False, "device": "cpu"}) == "cpu"
    assert "gpu_batch" not in dc.bench_sweeps(default_config())  # GPU-only sweep left out by config


def test_changing_one_decoding_parameter_touches_only_its_jobs():
    cfg = default_config()
    ev0, sw0 = dc.evaluations(cfg), dc.bench_sweeps(cfg)
    cfg2 = copy.deepcopy(cfg)
    cfg2["figures"]["threshold"]["thresholds"] = [0.6, 0.9, 1.0]
    ev1, sw1 = dc.evaluations(cfg2), dc.bench_sweeps(cfg2)
    changed = {k for k in ev0.keys() | ev1.keys() if ev0.get(k) != ev1.get(k)}
    assert changed == {(cfg["roles"]["main_bd"], cfg["columns"]["gsm8k"]["task"])}
    assert {k for k in sw0 if sw0[k] != sw1[k]} == {"threshold"}
    assert dc.parse_point("bd_b32_s8_t0.9_c1") == {"block_size": 32, "sub_block_size": 8, "threshold": 0.9,
                                                   "use_sub_block_cache": True}
    assert dc.point_name("bd", dc.parse_point("bd_b32_s8_t0.9_c1")) == "bd_b32_s8_t0.9_c1"


@pytest.mark.slow
def test_end_to_end_ci_config(tmp_path):
    """Reduced default config: every rule runs for real; then a second invocation does nothing."""
    args = ("--cores", "2", "--configfile", "config/ci.yaml", "--config", f"results_dir={tmp_path}")
    r = smk(*args, timeout=1500)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    for name in ("table1_main", "table2_recipe_ablation", "table3_subblock_size", "table4_block_size_mismatch",
                 "table5_case_single_turn", "table6_case_multi_turn"):
        md = (tmp_path / "tables" / f"{name}.md").read_text()
        assert "Scale: **ci**" in md
        assert (tmp_path / "tables" / f"{name}.tex").is_file()
    for name in ("fig1a_throughput_vs_accuracy", "fig1b_throughput_batch", "fig_threshold_gsm8k",
                 "fig_gpu_batch_throughput", "fig_subblock_accuracy", "fig_subblock_throughput", "fig_attention_masks"):
        assert (tmp_path / "figures" / f"{name}.png").stat().st_size > 0
    import pandas as pd

    for csv in ("accuracy.csv", "throughput.csv", "training_metrics.csv"):
        df = pd.read_csv(tmp_path / "ci" / csv)
        assert len(df) > 0
        for col in ("git_commit", "config_hash", "device_type", "torch_version", "seed"):
            assert col in df.columns
    acc = pd.read_csv(tmp_path / "ci" / "accuracy.csv")
    assert set(acc["status"]) <= {"ok", "n/a"}
    r2 = smk("-n", *args)
    assert r2.returncode == 0 and "Nothing to be done" in r2.stdout + r2.stderr
