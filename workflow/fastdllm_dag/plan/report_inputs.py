"""Which results each table and figure reads, so that it waits only on what it shows.

A table or figure reads the evaluation-job CSVs (``plan_points.accuracy_path``) of the models it shows -- its rows, the
rows its difference columns compare against, every seed copy ``<model>.seed<S>`` of a row (``plan.seed_group``),
the models of its role (``plan.role``) or its speed points (``plan_points.fig1a_models``) -- and the CSV of its own
throughput sweep (:data:`FIGURE_SWEEPS`), never the collected ``accuracy.csv`` / ``throughput.csv`` (which wait on
every job, the trained models' included).  The model sets come from the same plan functions
``workflow/fastdllm_dag/job/report_specs.py`` draws with; ``tests/test_report_inputs.py`` checks that a table or figure
built from these inputs alone equals one built from every result.  Pure functions of the config (no Snakemake),
used by ``workflow/rules/common.smk``.
"""
from __future__ import annotations

from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import points as plan_points

# The throughput sweep (plan_points.bench_sweeps) each figure takes its tokens/s from: the runs of one sweep are
# measured together, and the same setting measured by another sweep is another measurement.
FIGURE_SWEEPS = {"fig1a_throughput_vs_accuracy": "batch", "fig1b_throughput_batch": "batch",
                 "fig_threshold_gsm8k": "threshold", "fig_gpu_batch_throughput": "gpu_batch",
                 "fig_subblock_throughput": "subblock"}


def _rows(config: dict, table: str) -> list[str]:
    """A comparison table's models: its rows and their baselines, each with its seed copies."""
    rows = config["tables"][table]["rows"]
    shown = [r["model"] for r in rows] + [r["baseline"] for r in rows if r.get("baseline")]
    return list(dict.fromkeys(m for name in shown for m in plan.seed_group(config, name)))


# report -> the models whose accuracy it shows (as report_specs.build_table / draw_figure pick them)
ACCURACY_MODELS = {
    "table1_main": lambda c: _rows(c, "table1"),
    "table2_recipe_ablation": lambda c: _rows(c, "table2"),
    "table3_subblock_size": lambda c: [plan.role(c, "ablation_bd")],
    "table4_block_size_mismatch": lambda c: [plan.role(c, "ablation_bd")],
    "fig1a_throughput_vs_accuracy": plan_points.fig1a_models,
    "fig_threshold_gsm8k": lambda c: [plan.role(c, "speed_bd")],
    "fig_subblock_accuracy": lambda c: [plan.role(c, "ablation_bd")],
}


def accuracy_models(config: dict, name: str) -> list[str]:
    """The models whose accuracy table or figure ``name`` shows (a ValueError naming it when it shows none)."""
    if name not in ACCURACY_MODELS:
        raise ValueError(f"report {name!r} reads no accuracy results (reports that do: {sorted(ACCURACY_MODELS)})")
    return list(ACCURACY_MODELS[name](config))


def accuracy_inputs(config: dict, name: str, jobs: dict | None = None) -> list[str]:
    """The evaluation-job CSVs of the models ``name`` shows, in ``plan_points.evaluation_jobs`` order (the order
    ``collect_accuracy`` concatenates them in).  Every job of such a model is read: a sweep point measured on
    every item anyway is taken from the model's Table 1-2 job."""
    models = set(accuracy_models(config, name))
    jobs = plan_points.evaluation_jobs(config) if jobs is None else jobs
    return [plan_points.accuracy_path(config, j) for j, job in jobs.items() if job["model"] in models]


def throughput_inputs(config: dict, name: str) -> list[str]:
    """The CSV of the throughput sweep figure ``name`` draws (:data:`FIGURE_SWEEPS`); none when this run has no
    such sweep (``gpu_batch`` without ``gpu``: Figure 5 then draws the GPU result files alone)."""
    if name not in FIGURE_SWEEPS:
        raise ValueError(f"report {name!r} reads no throughput results (figures that do: {sorted(FIGURE_SWEEPS)})")
    sweep = FIGURE_SWEEPS[name]
    return [f"{plan.run_dir(config)}/throughput/{sweep}.csv"] if sweep in plan_points.bench_sweeps(config) else []
