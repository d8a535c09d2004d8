"""The pairs the summary page's findings and picture need beyond its comparisons: the batch sweep's timing-noise
pair, and each adapted row's gap to its AR base beside the paper's gap for the same pair
(``workflow/fastdllm_dag/job/report_specs.summary_spec``; drawn by analysis/summary_findings.py and
analysis/fig_findings.py).
"""
from __future__ import annotations

from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import pairs
from fastdllm_dag.plan import points as plan_points


def speed_pair(config: dict) -> dict:
    """``{bd, ar, noise}``: the speed pair (roles ``speed_bd`` / ``speed_ar``) and the row whose ratio to the AR
    model measures the timing noise: the first AR row of Table 1 adapted from ``speed_ar`` (its architecture, so the
    same work per token) that the batch sweep times; None when there is none."""
    ar = plan.role(config, "speed_ar")
    timed = plan_points.fig1a_models(config)
    noise = next((r["model"] for r in config["tables"]["table1"]["rows"]
                  if r["model"] in timed and r["model"] != ar and config["models"][r["model"]]["mode"] == "ar"
                  and r.get("baseline") == ar and r.get("relation", pairs.DEFAULT_RELATION) == "adapted_from"), None)
    return {"bd": plan.role(config, "speed_bd"), "ar": ar, "noise": noise}


def gap_rows(config: dict) -> list[dict]:
    """The rows of the findings picture: each Table 1 row with an AR baseline, then each Table 2 row (not already
    drawn) trained here from the main AR model; per row ``{model, baseline, paper: (table, row) | None,
    paper_baseline: (table, row) | None}``.  A Table 1 row's paper pair is its ``paper_row`` against
    ``paper_baseline`` (default: the baseline's ``paper_row``); a Table 2 row's is its paper row against the main AR
    model's paper row."""
    models, t1 = config["models"], config["tables"]["table1"]["rows"]
    paper_of = {r["model"]: r.get("paper_row") for r in t1}
    out = []
    for r in t1:
        b = r.get("baseline")
        if b and models[b]["mode"] == "ar":
            base = r.get("paper_baseline") or paper_of.get(b)
            out.append({"model": r["model"], "baseline": b, "paper": _ref("table1", r.get("paper_row")),
                        "paper_baseline": _ref("table1", base)})
    main_ar = plan.role(config, "main_ar")
    drawn = {o["model"] for o in out}
    for r in config["tables"]["table2"]["rows"]:
        if r["model"] not in drawn and main_ar in pairs.init_chain(config, r["model"]):
            out.append({"model": r["model"], "baseline": main_ar, "paper": _ref("table2", r.get("paper_row")),
                        "paper_baseline": _ref("table1", paper_of.get(main_ar))})
    return out


def _ref(table: str, row: str | None) -> tuple[str, str] | None:
    return (table, row) if row else None
