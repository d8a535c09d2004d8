"""Tables and figures wait only on what they show (workflow/fastdllm_dag/plan/report_inputs.py): each reads the
evaluation-job CSVs of its own models and its own throughput sweep, never the collected accuracy.csv / throughput.csv;
built from those inputs alone it is the same as built from every result; with released checkpoints and training data
present, Tables 3-4 and Figures 1a, 4, 6a plan no training job."""
import csv
import filecmp
import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from analysis.results_io import load_csv, load_csvs, load_throughput
from conftest import smk
from fastdllm_core.decode_config import DecodeConfig
from fastdllm_core.provenance import write_csv_atomic
from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import points as plan_points
from fastdllm_dag.plan import report_inputs, report_rules

ROOT = Path(__file__).resolve().parents[1]


def _config(name):
    return plan.expand_seeds(yaml.safe_load((ROOT / "config" / name).read_text()))


def test_models_of_each_report():
    c = _config("config.yaml")
    assert report_inputs.accuracy_models(c, "table3_subblock_size") == [plan.role(c, "ablation_bd")]
    assert report_inputs.accuracy_models(c, "fig_threshold_gsm8k") == [plan.role(c, "speed_bd")]
    t1 = report_inputs.accuracy_models(c, "table1_main")
    assert {"ntp.seed1", "bd_pad_cm.seed2", "ar_base"} <= set(t1)  # seed copies and baselines
    assert not {"bd_naive", "bd_pad"} & set(t1)  # Table 2's recipes are not Table 1's rows
    with pytest.raises(ValueError, match="fig1b_throughput_batch"):
        report_inputs.accuracy_models(c, "fig1b_throughput_batch")
    p = _config("paper.yaml")
    jobs = report_inputs.accuracy_inputs(p, "table3_subblock_size")
    assert jobs and all("/accuracy/fastdllm_v2_1.5b" in j for j in jobs)
    assert report_inputs.throughput_inputs(p, "fig_subblock_throughput") == ["results/paper/throughput/subblock.csv"]


def _metrics(config, task):
    return list(dict.fromkeys(c["metric"] for c in config["columns"].values() if c.get("task") == task))


def _write_results(config, d: Path):
    """Synthetic per-job accuracy CSVs and per-sweep throughput CSVs of ``config``'s plan (values drawn at random),
    and their concatenations accuracy.csv / throughput.csv (what collect_accuracy / collect_throughput write)."""
    rng, acc_paths, thr_paths = random.Random(0), [], []
    for job, spec in plan_points.evaluation_jobs(config).items():
        rows = []
        for task, points in spec["points"].items():
            for p in points:
                mode = DecodeConfig.slug_mode(p)
                fields = DecodeConfig.from_slug(p).row_fields(mode)
                rows += [dict(model=spec["model"], task=task, metric=m, value=round(rng.uniform(5, 95), 4),
                              n=plan_points.point_limit(p) or 256, status="ok", mode=mode, point=p, **fields)
                         for m in _metrics(config, task)]
        acc_paths.append(d / f"accuracy/{job}.csv")
        acc_paths[-1].parent.mkdir(parents=True, exist_ok=True)
        write_csv_atomic(acc_paths[-1], rows)
    for sweep, runs in plan_points.bench_sweeps(config).items():
        tps = [round(rng.uniform(10, 500), 3) for _ in runs]
        rows = [dict(model=r["model"], mode=r["mode"], batch_size=r["batch_size"], sweep=sweep, status="ok",
                     tokens_per_s=t, total_tokens=1000, wall_time_s_min=1000 / (1.1 * t),
                     wall_time_s_max=1000 / (0.9 * t), device_type="cpu", device_name="synthetic", **r["decode"])
                for r, t in zip(runs, tps)]
        thr_paths.append(d / f"throughput/{sweep}.csv")
        thr_paths[-1].parent.mkdir(parents=True, exist_ok=True)
        write_csv_atomic(thr_paths[-1], rows)
    for name, paths in (("accuracy.csv", acc_paths), ("throughput.csv", thr_paths)):
        rows = [r for p in paths for r in csv.DictReader(open(p, newline=""))]
        write_csv_atomic(d / name, rows)


def _build(name, config, out: Path, acc, thr):
    from analysis.tables import write_table
    from fastdllm_dag.job import report_specs

    out.parent.mkdir(exist_ok=True)

    if name in report_rules.TABLE_NAMES:
        write_table(report_specs.build_table(name, config, acc=acc), out.with_suffix(".md"), out.with_suffix(".tex"))
        return [out.with_suffix(".md"), out.with_suffix(".tex")]
    report_specs.draw_figure(name, config, out.with_suffix(".png"), out.with_suffix(".pdf"), acc=acc, thr=thr)
    return [out.with_suffix(".png")]


@pytest.mark.parametrize("cfg", ["config.yaml", pytest.param("paper.yaml", marks=pytest.mark.slow)])
def test_each_report_from_its_own_inputs_is_the_report_from_every_result(cfg, tmp_path, monkeypatch):
    """Every table and figure that reads accuracy or throughput, built from the collected CSVs and from its rule's
    own inputs (report_inputs), on synthetic results of the whole plan: the same files, byte for byte (the paper
    config's figures take a minute on two cores: slow)."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    c = dict(_config(cfg), results_dir=str(tmp_path / "results"))
    run = Path(plan.run_dir(c))
    _write_results(c, run)
    full_acc, full_thr = load_csv(run / "accuracy.csv"), load_throughput(run / "throughput.csv")
    names = [s["name"] for s in report_rules.report_rules(c) if {"acc", "thr"} & set(s["inputs"])]
    assert len(names) == 10
    for name in names:
        own_acc = load_csvs(report_inputs.accuracy_inputs(c, name)) if name in report_inputs.ACCURACY_MODELS else None
        own_thr = (load_throughput(report_inputs.throughput_inputs(c, name))
                   if name in report_inputs.FIGURE_SWEEPS else None)
        assert own_acc is None or len(own_acc) < len(full_acc), name  # a part of the results, not all
        a = _build(name, c, tmp_path / "full" / name, full_acc, full_thr)
        b = _build(name, c, tmp_path / "own" / name, own_acc, own_thr)
        for x, y in zip(a, b):
            assert filecmp.cmp(x, y, shallow=False), f"{name}: {x.name} differs from {y.name}"


def _dry_run(targets, configfile, tmp_path):
    r = smk(*targets, "-n", "--nolock", "--cores", "2", "--configfile", str(configfile))
    assert r.returncode == 0, r.stderr[-3000:]
    return dict(re.findall(r"^(\w+)\s+(\d+)$", (r.stdout + r.stderr).split("Job stats:", 1)[1], re.M))


def test_paper_tables_of_released_checkpoints_plan_no_training_when_training_data_exists(tmp_path):
    """config/paper.yaml with its training data present (data.train_files: a file that exists): Table 1 trains
    its trained rows, while Tables 3-4 and Figures 1a, 4, 6a (released checkpoints) plan no training job."""
    data = tmp_path / "adaptation_train.jsonl"
    data.write_text("{}\n")
    cfg = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    cfg["data"]["train_files"] = [str(data)]
    cfg["results_dir"] = str(tmp_path / "results")
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(cfg))
    released_only = ["table3_subblock_size", "table4_block_size_mismatch", "fig1a_throughput_vs_accuracy",
                     "fig_threshold_gsm8k", "fig_subblock_accuracy"]
    stats = _dry_run(released_only, tmp_path / "paper.yaml", tmp_path)
    assert all(stats.get(t) == "1" for t in released_only), stats
    assert "train_model" not in stats and "collect_accuracy" not in stats and "collect_training" not in stats
    stats = _dry_run(["table1_main"], tmp_path / "paper.yaml", tmp_path)
    assert int(stats.get("train_model", 0)) >= 2, stats  # nemo_ft_1.5b, nemo_ft_7b


class _Named(dict):
    """A rule's named inputs / outputs as the scripts read them (``items()``, attributes)."""
    __getattr__ = dict.__getitem__


@pytest.mark.parametrize("name", ["table3_subblock_size", "fig_threshold_gsm8k", "fig_gpu_batch_throughput"])
def test_report_scripts_read_their_list_of_inputs(name, tmp_path, monkeypatch):
    """make_table.py / make_figure.py as the rule runs them (its inputs: lists of per-job CSVs, an empty list for a
    sweep this run has not) write what the collected CSVs give."""
    import runpy

    monkeypatch.setenv("MPLBACKEND", "Agg")
    c = dict(_config("config.yaml"), results_dir=str(tmp_path / "results"))
    run = Path(plan.run_dir(c))
    _write_results(c, run)
    spec = next(s for s in report_rules.report_rules(c) if s["name"] == name)
    files = {"acc": lambda: report_inputs.accuracy_inputs(c, name), "gpu": lambda: [],
             "thr": lambda: report_inputs.throughput_inputs(c, name)}
    inputs = _Named({k: files[k]() for k in spec["inputs"]})
    assert name != "fig_gpu_batch_throughput" or inputs["thr"] == []  # no gpu_batch sweep on the CPU default
    table = spec["kind"] == "table"
    exts = ("md", "tex") if table else ("png", "pdf")
    out = _Named({e: str(tmp_path / "rule" / f"{name}.{e}") for e in exts})
    (tmp_path / "rule").mkdir()
    scripts = ROOT / "workflow" / "scripts"
    sm = SimpleNamespace(input=inputs, output=out, params=SimpleNamespace(name=name), config=c, log=[], threads=1,
                         scriptdir=str(scripts))
    runpy.run_path(str(scripts / ("make_table.py" if table else "make_figure.py")), init_globals={"snakemake": sm})
    want = _build(name, c, tmp_path / "full" / name, load_csv(run / "accuracy.csv"),
                  load_throughput(run / "throughput.csv"))
    assert filecmp.cmp(want[0], out[exts[0]], shallow=False), name
