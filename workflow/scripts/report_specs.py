"""From the DAG config to the analysis functions: which rows, columns and decoding settings each table and figure
shows.  Pure (config + DataFrames in, Table / files out); used by make_table.py, make_figure.py and the tests."""
from __future__ import annotations

import pandas as pd

import dagconfig as dc
from analysis import figures as F
from analysis import tables as T
from analysis.paper_values import TABLE1_COLUMNS

PAPER_SCALE_NOTE = {
    "tiny": "Embedded default: tiny models trained here on the synthetic suite (synth_arith stands in for GSM8K, "
            "synth_code for HumanEval base/plus); the paper's numbers are for Qwen2.5-Instruct 1.5B/7B.",
    "ci": "Reduced CI run of the embedded default (very small models and evaluation sets).",
}


def scale_note(config: dict) -> str:
    return PAPER_SCALE_NOTE.get(config["scale"], f"Scale '{config['scale']}': models and data as configured in "
                                                 "the config file; the paper's numbers beside them.")


def column_specs(config: dict, ids: list[str], with_avg: bool = False) -> list[dict]:
    out = []
    for cid in ids:
        c = config["columns"][cid]
        spec = {"id": cid, "title": TABLE1_COLUMNS[cid]}
        spec.update({"na": c["na"]} if "na" in c else
                    {"task": c["task"], "metric": c["metric"], "comparable": bool(c.get("comparable", False))})
        out.append(spec)
    if with_avg:
        out.append({"id": "avg", "title": TABLE1_COLUMNS["avg"], "average_of": list(ids)})
    return out


def label(config: dict, model: str) -> str:
    return config["models"][model].get("label", model)


def build_table(name: str, config: dict, acc: pd.DataFrame | None = None, cases: pd.DataFrame | None = None) -> T.Table:
    acc = acc if acc is not None else pd.DataFrame()
    scale, base, main_bd = config["scale"], dc.base_decode(config), config["roles"]["main_bd"]
    t = config["tables"]
    notes = [scale_note(config)]
    if name == "table1_main":
        groups = [{"label": label(config, r["model"]), "model": r["model"], "paper_row": r.get("paper_row"),
                   "decode": base} for r in t["table1"]["rows"]]
        cols = column_specs(config, dc.AVG_COLUMNS, with_avg=True)
        notes.append(f"Decoding: block {base['block_size']}, sub-block {base['sub_block_size']}, threshold "
                     f"{base['threshold']}, sub-block cache {'on' if base['use_sub_block_cache'] else 'off'}; "
                     "AR rows use greedy autoregressive decoding.")
        return T.comparison_table(name=name, title="Table 1: main results", scale=scale, paper_table="table1",
                                  groups=groups, columns=cols, acc=acc, first_header="Model", notes=notes)
    if name == "table2_recipe_ablation":
        groups = [{"label": r.get("label") or label(config, r["model"]), "model": r["model"],
                   "paper_row": r.get("paper_row"), "decode": base} for r in t["table2"]["rows"]]
        cols = column_specs(config, t["table2"]["columns"], with_avg=True)
        notes.append("All recipes adapt the same AR base with the same steps and data. Avg. is over the columns "
                     "shown; the paper's Avg. is over its own Table 2 columns.")
        return T.comparison_table(name=name, title="Table 2: training recipe ablation", scale=scale,
                                  paper_table="table2", groups=groups, columns=cols, acc=acc, first_header="Recipe",
                                  notes=notes)
    if name == "table3_subblock_size":
        groups = [{"label": f"sub-block {s}", "model": main_bd, "paper_row": str(s),
                   "decode": dict(base, sub_block_size=s)} for s in t["table3"]["sub_blocks"]]
        notes.append(f"Model: {label(config, main_bd)}; block {base['block_size']}, threshold {base['threshold']}.")
        return T.comparison_table(name=name, title="Table 3: sub-block size", scale=scale, paper_table="table3",
                                  groups=groups, columns=column_specs(config, t["table3"]["columns"]), acc=acc,
                                  first_header="Sub-block size", notes=notes)
    if name == "table4_block_size_mismatch":
        groups = [{"label": f"block {b}", "model": main_bd, "paper_row": str(b),
                   "decode": dict(base, block_size=b, sub_block_size=b)} for b in t["table4"]["block_sizes"]]
        notes.append(f"Model: {label(config, main_bd)} (trained with block size "
                     f"{config.get('training', {}).get('objective', {}).get('block_size', 32)}); inference block "
                     f"size varied, sub-block = block, threshold {base['threshold']}.")
        return T.comparison_table(name=name, title="Table 4: inference block size (train/inference mismatch)",
                                  scale=scale, paper_table="table4", groups=groups,
                                  columns=column_specs(config, t["table4"]["columns"]), acc=acc,
                                  first_header="Inference block size", notes=notes)
    if name in ("table5_case_single_turn", "table6_case_multi_turn"):
        cases = cases if cases is not None else pd.DataFrame()
        title = "Table 5: single-turn case study" if name.startswith("table5") else "Table 6: multi-turn case study"
        return T.case_study_table(name=name, title=title, scale=scale, cases=cases, notes=notes)
    raise ValueError(f"unknown table {name!r}")


def _col(config, key):
    c = config["columns"][config["figures"][key]["column"]]
    return c["task"], c["metric"]


def draw_figure(name: str, config: dict, png, pdf, acc=None, thr=None, gpu_frames=()) -> None:
    acc = acc if acc is not None else pd.DataFrame()
    thr = thr if thr is not None else pd.DataFrame()
    scale, f, main_bd = config["scale"], config["figures"], config["roles"]["main_bd"]
    rows = [{"model": r["model"], "label": label(config, r["model"]), "mode": config["models"][r["model"]]["mode"]}
            for r in config["tables"]["table1"]["rows"]]
    if name == "fig1a_throughput_vs_accuracy":
        task, metric = _col(config, "threshold")
        F.fig1a_throughput_vs_accuracy(acc, thr, {"models": rows, "ar_reference": config["roles"]["main_ar"],
                                                  "task": task, "metric": metric,
                                                  "speed_decode": dc.speed_decode(config), "batch": 1},
                                       scale, png, pdf)
    elif name == "fig1b_throughput_batch":
        F.fig1b_throughput_batch(thr, {"models": rows, "batches": f["batch"]["batches"],
                                       "speed_decode": dc.speed_decode(config)}, scale, png, pdf)
    elif name == "fig_threshold_gsm8k":
        task, metric = _col(config, "threshold")
        F.fig_threshold_gsm8k(acc, thr, {"model": main_bd, "task": task, "metric": metric,
                                         "thresholds": f["threshold"]["thresholds"], "decode": dc.base_decode(config),
                                         "batch": f["threshold"]["batch"]}, scale, png, pdf)
    elif name == "fig_gpu_batch_throughput":
        frames = [d for d in [thr, *gpu_frames] if d is not None and not d.empty]
        allthr = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        F.fig_gpu_batch_throughput(allthr, {"ar_model": config["roles"]["main_ar"], "bd_model": main_bd,
                                            "decode": dc.speed_decode(config)}, png, pdf)
    elif name == "fig_subblock_accuracy":
        task, metric = _col(config, "subblock")
        F.fig_subblock_accuracy(acc, {"model": main_bd, "task": task, "metric": metric,
                                      "sub_blocks": f["subblock"]["sub_blocks"], "caches": f["subblock"]["caches"],
                                      "decode": dc.speed_decode(config)}, scale, png, pdf)
    elif name == "fig_subblock_throughput":
        F.fig_subblock_throughput(thr, {"model": main_bd, "sub_blocks": f["subblock"]["sub_blocks"],
                                        "caches": f["subblock"]["caches"], "batches": f["subblock"]["batches"],
                                        "decode": dc.speed_decode(config)}, scale, png, pdf)
    elif name == "fig_attention_masks":
        F.fig_attention_masks(png, pdf, f["masks"]["seq_len"], f["masks"]["block_size"])
    else:
        raise ValueError(f"unknown figure {name!r}")
