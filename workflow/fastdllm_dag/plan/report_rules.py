"""The tables and figures the DAG makes, as data: one spec each (rule name, description, the results it reads,
its dry-run message).  ``workflow/rules/reports.smk`` makes one rule per spec from a single template; the rule
has the table's or figure's short name, so that it can be rebuilt alone (``snakemake --cores all
table3_subblock_size``).  What each table and figure shows is ``workflow/fastdllm_dag/job/report_specs.py``."""
from __future__ import annotations

from fastdllm_dag.plan import points as plan_points
from fastdllm_dag.plan import summaries

TABLE_DOC = " (reproduced | paper | difference)."


def _table(name: str, doc: str, inputs: tuple, message: str | None = None) -> dict:
    return {"name": name, "kind": "table", "doc": doc + TABLE_DOC, "inputs": inputs,
            "message": None if message is None else f"{message} -> {{output.md}}: {{summary}}"}


def _figure(name: str, doc: str, inputs: tuple, message: str | None = None) -> dict:
    return {"name": name, "kind": "figure", "doc": doc, "inputs": inputs,
            "message": None if message is None else f"{message} -> {{output.png}}: {{summary}}"}


# (spec, summary of the models it shows: config -> text); inputs name the kinds of results it reads (acc: the
# evaluation jobs of the models it shows, thr: its throughput sweep; workflow/fastdllm_dag/plan/report_inputs.py), made
# into files by report_input_files of workflow/rules/common.smk
SPECS = [
    (_table("table1_main", "Table 1: main results", ("acc",), "Table 1 (main results)"),
     lambda c: f"models {summaries.table_rows_summary(c, 'table1')}"),
    (_table("table2_recipe_ablation", "Table 2: training recipe ablation", ("acc",),
            "Table 2 (training recipe ablation)"),
     lambda c: f"models {summaries.table_rows_summary(c, 'table2')}"),
    (_table("table3_subblock_size", "Table 3: sub-block size", ("acc",), "Table 3 (sub-block size)"),
     lambda c: f"model {summaries.role_summary(c, 'ablation_bd')}"),
    (_table("table4_block_size_mismatch", "Table 4: inference block size", ("acc",),
            "Table 4 (inference block size)"),
     lambda c: f"model {summaries.role_summary(c, 'ablation_bd')}"),
    (_table("table5_case_single_turn", "Table 5: single-turn case study", ("cases_single_turn",)), None),
    (_table("table6_case_multi_turn", "Table 6: multi-turn case study", ("cases_multi_turn",)), None),
    (_figure("fig1a_throughput_vs_accuracy", "Figure 1a: throughput vs accuracy (batch 1).", ("acc", "thr"),
             "Figure 1a (throughput vs accuracy; speed-up)"),
     lambda c: f"models {summaries.role_summary(c, 'speed_bd', 'speed_ar')}"),
    (_figure("fig1b_throughput_batch", "Figure 1b: throughput at batch 1 and 4.", ("thr",),
             "Figure 1b (throughput by batch size)"),
     lambda c: f"models {summaries.role_summary(c, 'speed_bd', 'speed_ar')}"),
    (_figure("fig_threshold_gsm8k", "Figure 4: accuracy and throughput vs threshold.", ("acc", "thr"),
             "Figure 4 (threshold sweep)"),
     lambda c: f"models {summaries.role_summary(c, 'speed_bd')}"),
    (_figure("fig_gpu_batch_throughput", "Figure 5: AR vs diffusion by batch size per GPU type.", ("thr", "gpu"),
             "Figure 5 (AR vs diffusion by batch size, GPU)"),
     lambda c: (f"models {summaries.role_summary(c, 'speed_bd', 'speed_ar')}; diffusion at "
                f"{summaries.decode_summary([plan_points.gpu_batch_decode(c)])}")),
    (_figure("fig_subblock_accuracy", "Figure 6a: accuracy vs sub-block size, cache on/off.", ("acc",),
             "Figure 6a (accuracy vs sub-block size)"),
     lambda c: f"models {summaries.role_summary(c, 'ablation_bd')}"),
    (_figure("fig_subblock_throughput", "Figure 6b: throughput vs sub-block size, cache on/off, batch 1 and 32.",
             ("thr",), "Figure 6b (throughput vs sub-block size)"),
     lambda c: f"models {summaries.role_summary(c, 'ablation_bd')}"),
    (_figure("fig_attention_masks", "Figure 7: training and inference attention masks.", ()), None),
]

TABLE_NAMES = [s["name"] for s, _ in SPECS if s["kind"] == "table"]
FIGURE_NAMES = [s["name"] for s, _ in SPECS if s["kind"] == "figure"]


def report_rules(config: dict) -> list[dict]:
    """The specs with their dry-run messages filled in for ``config`` (``message`` None: Snakemake's default)."""
    return [dict(spec, message=None if spec["message"] is None else
                 spec["message"].replace("{summary}", summary(config))) for spec, summary in SPECS]
