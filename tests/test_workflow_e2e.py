"""The DAG end to end (slow): config/ci.yaml's every rule run for real, then the budget and scale studies' targets
(``studies:``, workflow/rules/studies.smk) on that run; each followed by a no-op second invocation."""
import re

import pytest
import yaml

from conftest import smk


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
    _budget_study_end_to_end(tmp_path)
    _scale_study_end_to_end(tmp_path)


def _budget_study_end_to_end(tmp_path):
    """The budget study's target on the run above (its AR base and test sets; tests/data/budget_study_ci.yaml over
    config/ci.yaml's studies): its base and every snapshot scored, trained and timed into the committed-rows folder
    (<results_dir>/budget_study/points), the table, fit and figure written; then a no-op."""
    import pandas as pd

    args = ("--cores", "2", "--configfile", "config/ci.yaml", "tests/data/budget_study_ci.yaml", "--config",
            f"results_dir={tmp_path}")
    r = smk("budget_study", *args, timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    md = (tmp_path / "budget_study" / "budget_study.md").read_text()
    models = yaml.safe_load(open("config/config.yaml"))["models"]  # the page names models by their labels
    recipe, ntp = models["bd_pad_cm"]["label"], models["ntp"]["label"]
    for row in (f"| {recipe} | 1x |", f"| {recipe} | 2x |", f"| {ntp} | 2x |", f"| {recipe} [lr = 0.001] | 2x |"):
        assert row in md, row
    summary = pd.read_csv(tmp_path / "budget_study" / "budget_study.csv")
    bd = summary[(summary["model"] == "bd_pad_cm") & summary["lever"].isna()]
    assert set(bd["quantity"]) == {"accuracy", "accuracy_vs_ntp", "accuracy_speed", "tokens_per_forward", "speedup_b1"}
    assert sorted(bd["budget"].unique()) == [1, 2] and (bd["tokens_per_param"] > 0).all()
    assert (tmp_path / "budget_study" / "budget_study.png").stat().st_size > 0
    assert (tmp_path / "budget_study" / "budget_fit.csv").is_file()
    points = tmp_path / "budget_study" / "points"
    assert len(list(points.glob("*.accuracy.csv"))) == 7  # the base + 3 chains (2 models, the lever) x 2 budgets
    assert len(list(points.glob("*.speed.csv"))) == len(list(points.glob("*.metrics.csv"))) == 6
    assert (points / "base.default.accuracy.csv").is_file()
    assert (points / "bd_pad_cm.lr-0.001.s0.x2.speed.csv").is_file()
    r2 = smk("budget_study", "-n", *args)
    assert r2.returncode == 0 and "Nothing to be done" in r2.stdout + r2.stderr


def _scale_study_end_to_end(tmp_path):
    """The scale study's target on the run above (config/ci.yaml: its two CI shapes, budget 1, seed 0): the larger
    size's base built, rounded and released with a manifest, both bases scored, every snapshot trained, scored and
    timed into the committed-rows folder, the page and figure written; then a no-op; then a deleted row is remade
    and nothing else."""
    import json

    import pandas as pd

    args = ("--cores", "2", "--configfile", "config/ci.yaml", "--config", f"results_dir={tmp_path}",
            f"studies={{scale: {{released_dir: {tmp_path}/released}}}}")
    r = smk("scale_study", *args, timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    manifest = json.loads((tmp_path / "released" / "scale_w48" / "manifest.json").read_text())
    assert manifest["shape"]["hidden_size"] == 48 and manifest["scores"] and "model.safetensors" in manifest["files"]
    assert set(manifest["trained"]) == {"pretrain", "sft"}
    from analysis.study_cost import stage_seconds

    build = pd.read_csv(tmp_path / "scale_study" / "points" / "base.w48.build.csv")
    for stage, rows in build.groupby("stage"):  # the manifest's time is the build rows' time, rounded to 0.1 s
        seconds = stage_seconds(rows)
        assert seconds > 0 and manifest["trained"][stage]["train_seconds"] == round(seconds, 1)
    page = (tmp_path / "scale_study" / "scale_study.md").read_text()
    assert "| w48 |" in page.split("## Cost of the bases it built")[1]  # from the build rows its release wrote
    summary = pd.read_csv(tmp_path / "scale_study" / "scale_study.csv")
    assert set(summary["size"]) == {"w32", "w48"}
    bd = summary[summary["model"] == "bd_pad_cm"]
    assert {"accuracy", "accuracy_vs_ntp", "accuracy_speed", "tokens_per_forward", "speedup_b1"} <= set(bd["quantity"])
    assert (tmp_path / "scale_study" / "scale_study.png").stat().st_size > 0
    points = tmp_path / "scale_study" / "points"
    assert len(list(points.glob("*.accuracy.csv"))) == 6  # 2 bases + 2 sizes x 2 models
    r2 = smk("scale_study", "-n", *args)
    assert r2.returncode == 0 and "Nothing to be done" in r2.stdout + r2.stderr
    (points / "w48.ntp.s0.x1.speed.csv").unlink()  # a deleted row: its snapshot alone is remade
    r3 = smk("scale_study", "-n", *args)
    out = r3.stdout + r3.stderr
    jobs = dict(re.findall(r"^(scale_\w+)\s+(\d+)$", out, re.M))
    assert r3.returncode == 0 and "models/w48.ntp.s0.x1" in out
    assert jobs.get("scale_train") == "1" and jobs.get("scale_speed") == "1" and "scale_base" not in jobs
    none = args[:-1] + (f"studies={{scale: {{released_dir: {tmp_path}/released, run_bases: []}}}}",)
    r4 = smk("scale_study", "-n", *none)  # run_bases []: the report of the rows there, the missing one not remade
    jobs = dict(re.findall(r"^(scale_\w+)\s+(\d+)$", r4.stdout + r4.stderr, re.M))
    assert r4.returncode == 0 and set(jobs) <= {"scale_report", "scale_study"}, (r4.stdout + r4.stderr)[-2000:]
