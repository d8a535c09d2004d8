"""From the DAG config to the analysis functions: which rows, columns and decoding settings each table and figure
shows.  Pure (config + DataFrames in, Table / files out); used by make_table.py, make_figure.py and the tests."""
from __future__ import annotations

import pandas as pd

from analysis import figures as F
from analysis import tables as T
from analysis.paper_values import TABLE1_COLUMNS
from fastdllm_core.decode_config import BLOCK_SIZE
from fastdllm_dag.job import summary_pairs
from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import pairs
from fastdllm_dag.plan import points as plan_points
from fastdllm_dag.plan.report_inputs import FIGURE_SWEEPS  # each figure's throughput sweep (also its rule's input)

PAPER_SCALE_NOTE = {
    "tiny": "Embedded default: tiny models trained here on the synthetic suite (synth_arith stands in for GSM8K, "
            "synth_code for HumanEval base/plus); the paper's numbers are for Qwen2.5-Instruct 1.5B/7B.",
    "ci": "Reduced CI run of the embedded default (very small models and evaluation sets).",
    "rehearsal": "REHEARSAL, not results: the paper-scale DAG run with tiny random stand-in weights in the released "
                 "formats and small stand-in benchmark files (config/rehearsal.yaml). It shows that every job runs; "
                 "no number here says anything about the paper's models.",
}
# the label every table and figure of a rehearsal carries in its title
REHEARSAL_LABEL = "REHEARSAL (stand-in weights, not results)"


def is_rehearsal(config: dict) -> bool:
    return config.get("scale") == "rehearsal"


def titled(config: dict, title: str) -> str:
    """A table's or figure's title, labelled as a rehearsal when it is one."""
    return f"{REHEARSAL_LABEL}: {title}" if is_rehearsal(config) else title


def scale_note(config: dict) -> str:
    return PAPER_SCALE_NOTE.get(config["scale"], f"Scale '{config['scale']}': models and data as configured in "
                                                 "the config file; the paper's numbers beside them.")


def limit_note(config: dict, sweep: bool = False) -> list[str]:
    """Says that a table's cells rest on the first N test items (``eval.limit``; the sweeps' ``eval.sweep_limit``)
    when a limit is set, so that a reader never takes them for the whole benchmark."""
    ev = config.get("eval") or {}
    key, n = ("eval.sweep_limit", ev.get("sweep_limit")) if sweep and ev.get("sweep_limit") else \
        ("eval.limit", ev.get("limit"))
    return [f"Each cell rests on at most the first {n} test items of its task ({key}: {n}), not the whole "
            "benchmark."] if n else []


def column_specs(config: dict, ids: list[str], with_avg: bool = False) -> list[dict]:
    out = []
    for cid in ids:
        c = config["columns"][cid]
        spec = {"id": cid, "title": TABLE1_COLUMNS[cid]}
        spec.update({"na": c["na"]} if "na" in c else
                    {"task": c["task"], "metric": c["metric"], "comparable": bool(c.get("comparable", False))})
        out.append(spec)
    if with_avg:
        # the paper's Avg. is over its nine columns: a mean over fewer is labelled partial, never differenced
        out.append({"id": "avg", "title": TABLE1_COLUMNS["avg"], "average_of": list(ids),
                    "paper_columns": list(plan.AVG_COLUMNS)})
    return out


def label(config: dict, model: str) -> str:
    return config["models"][model].get("label", model)


def table2_provenance(config: dict) -> tuple[dict[str, str], str]:
    """(model -> label suffix, note) for Table 2: a row whose model is a released checkpoint is labelled as such
    when it sits beside rows trained here (different code, data and budget: a confound the table must show)."""
    models = config["models"]
    rows = [r["model"] for r in config["tables"]["table2"]["rows"]]
    released = [m for m in rows if not plan.is_trained(models[m])]
    trained = [m for m in rows if plan.is_trained(models[m])]
    if not released:
        return {}, ("All recipes are trained here by the same code" + (", from the same AR base with the same "
                    "steps and data." if plan.share_training(config, trained) else
                    "; their init or optimiser budget differ (see the config)."))
    marks = {m: f" [{plan.RELEASED_TEXT}]" for m in released}
    if not trained:
        return marks, "All rows are released checkpoints (not trained here)."
    return marks, (f"Rows marked '{plan.RELEASED_TEXT}' were not trained by this code, data and budget, unlike the "
                   "other rows: their differences mix the recipe with the training run.")


def build_table(name: str, config: dict, acc: pd.DataFrame | None = None, cases: pd.DataFrame | None = None) -> T.Table:
    acc = acc if acc is not None else pd.DataFrame()
    notes = [scale_note(config)]
    if name in ("table1_main", "table2_recipe_ablation"):
        return _model_table(name, config, acc, notes)
    if name in ("table3_subblock_size", "table4_block_size_mismatch"):
        return _decoding_table(name, config, acc, notes)
    if name in ("table5_case_single_turn", "table6_case_multi_turn"):
        cases = cases if cases is not None else pd.DataFrame()
        title = "Table 5: single-turn case study" if name.startswith("table5") else "Table 6: multi-turn case study"
        main_bd = plan.role(config, "main_bd")
        return T.case_study_table(name=name, title=titled(config, title), scale=config["scale"], cases=cases,
                                  notes=notes, model_label=f"{label(config, main_bd)} ({main_bd}, roles.main_bd)")
    raise ValueError(f"unknown table {name!r}")


def _model_table(name: str, config: dict, acc: pd.DataFrame, notes: list[str]) -> T.Table:
    """Table 1 (main results) or Table 2 (recipe ablation): a row per model."""
    scale, base, t = config["scale"], plan_points.base_decode(config), config["tables"]
    if name == "table1_main":
        rows = t["table1"]["rows"]
        groups = [dict(seed_group_spec(config, r["model"], label(config, r["model"])), paper_row=r.get("paper_row"))
                  for r in rows]
        cols = column_specs(config, plan.AVG_COLUMNS, with_avg=True)
        notes.append(f"Decoding: block {base['block_size']}, sub-block {base['sub_block_size']}, threshold "
                     f"{base['threshold']}, sub-block cache {'on' if base['use_sub_block_cache'] else 'off'}; "
                     "AR rows use greedy autoregressive decoding.")
        notes += pair_notes(config) + departure_notes(config, [r["model"] for r in rows])
        notes += seed_notes(config, [r["model"] for r in rows]) + limit_note(config)
        return T.comparison_table(name=name, title=titled(config, "Table 1: main results"), scale=scale,
                                  paper_table="table1", groups=groups, columns=cols, acc=acc, first_header="Model",
                                  notes=notes, contrasts=table1_contrasts(rows))
    suffix, prov = table2_provenance(config)
    groups = [dict(seed_group_spec(config, r["model"], (r.get("label") or label(config, r["model"]))
                                   + suffix.get(r["model"], "")), paper_row=r.get("paper_row"))
              for r in t["table2"]["rows"]]
    cols = column_specs(config, t["table2"]["columns"], with_avg=True)
    notes.append(prov + " Avg. is over the columns shown; the paper's Avg. is over its nine columns, so a "
                 "mean over fewer is labelled partial and not differenced against it.")
    notes += seed_notes(config, [r["model"] for r in t["table2"]["rows"]]) + limit_note(config)
    return T.comparison_table(name=name, title=titled(config, "Table 2: training recipe ablation"), scale=scale,
                              paper_table="table2", groups=groups, columns=cols, acc=acc, first_header="Recipe",
                              notes=notes, contrasts=[(i, i + 1) for i in range(len(groups) - 1)])


def _decoding_table(name: str, config: dict, acc: pd.DataFrame, notes: list[str]) -> T.Table:
    """Table 3 (sub-block size) or Table 4 (inference block size): a row per decoding setting of one model."""
    scale, base, abl = config["scale"], plan_points.base_decode(config), plan.role(config, "ablation_bd")
    t = config["tables"]
    if name == "table3_subblock_size":
        groups = [{"label": f"sub-block {s}", "model": abl, "paper_row": str(s),
                   "decode": dict(base, sub_block_size=s)} for s in t["table3"]["sub_blocks"]]
        notes.append(f"Model: {label(config, abl)} (roles.ablation_bd; the paper's Table 3 is on its 1.5B model); "
                     f"block {base['block_size']}, threshold {base['threshold']}.")
        ref, title, cols, header = (_index_of(t["table3"]["sub_blocks"], base["sub_block_size"]),
                                    "Table 3: sub-block size", t["table3"]["columns"], "Sub-block size")
    else:
        objective = config.get("training", {}).get("objective", {})
        groups = [{"label": f"block {b}", "model": abl, "paper_row": str(b),
                   "decode": dict(base, block_size=b, sub_block_size=b)} for b in t["table4"]["block_sizes"]]
        notes.append(f"Model: {label(config, abl)} (roles.ablation_bd; the paper's Table 4 is on its 1.5B model; "
                     f"trained with block size {objective.get('block_size', BLOCK_SIZE)}); inference block "
                     f"size varied, sub-block = block, threshold {base['threshold']}.")
        ref, title, cols, header = (_index_of(t["table4"]["block_sizes"],
                                              objective.get("block_size", base["block_size"])),
                                    "Table 4: inference block size (train/inference mismatch)",
                                    t["table4"]["columns"], "Inference block size")
    notes += limit_note(config, sweep=True)
    return T.comparison_table(name=name, title=titled(config, title), scale=scale, paper_table=name[:6], groups=groups,
                              columns=column_specs(config, cols), acc=acc, first_header=header, notes=notes,
                              contrasts=[(ref, i) for i in range(len(groups)) if ref is not None and i != ref])


def seed_group_spec(config: dict, model: str, text: str) -> dict:
    """A table row's group: the model, its seed replicates (``members``), its label (which says how many seeds the
    row averages) and its accuracy setting per task (``plan_points.model_decode``)."""
    members = plan.seed_group(config, model)
    return {"label": text + (f" (mean of {len(members)} seeds)" if len(members) > 1 else ""), "model": model,
            "members": members, "decode": plan_points.model_decode(config, model) or None,
            "decode_by_task": {t: plan_points.model_decode(config, model, t) or None for t in plan.tasks(config)}}


def seed_notes(config: dict, models: list[str]) -> list[str]:
    """How the rows' intervals are computed (and, with seeds, that sweeps use one)."""
    seeds = {m: len(plan.seed_group(config, m)) for m in models}
    if max(seeds.values(), default=1) == 1:
        return ["± is the Wilson 95% interval over the n test items of each cell."]
    return ["Rows marked 'mean of S seeds' average S training runs of the recipe that differ only in their seed "
            f"(adaptation_seeds: {plan.adaptation_seeds(config)}), each evaluated on the same n items; their ± is a "
            "95% interval for another draw of seeds and items: mean ± t * sqrt(s^2/S + m(1 - m)/n), s^2 the variance "
            "between the seeds' accuracies, m the mean, t Student's 97.5% quantile at the Welch-Satterthwaite degrees "
            "of freedom (fastdllm_core.intervals.seed_interval). Other rows: the Wilson 95% interval over the n items. "
            "A difference is a finding only when the two intervals do not overlap. The decoding sweeps (Tables 3-4, "
            "Figures 4 and 6) use the first seed only."]


def table1_contrasts(rows: list[dict]) -> list[tuple[int, int]]:
    """Table 1's difference rows: each row against its own ``baseline`` (what the pair is: :func:`pair_notes`)."""
    index = {r["model"]: i for i, r in enumerate(rows)}
    return [(index[r["baseline"]], i) for i, r in enumerate(rows) if r.get("baseline")]


def pair_notes(config: dict) -> list[str]:
    """What each Table 1 difference row compares, where it is not a row against the model it was adapted from."""
    rows = config["tables"]["table1"]["rows"]
    odd = [f"{label(config, r['model'])} - {label(config, r['baseline'])}: {pairs.pair_label(config, r)}"
           for r in rows if r.get("baseline") and r.get("relation", pairs.DEFAULT_RELATION) != "adapted_from"]
    return ["Difference rows that are not against the model the row was adapted from: " + "; ".join(odd) + "."] \
        if odd else []


def departure_notes(config: dict, models: list[str]) -> list[str]:
    """Each model's ``departures`` (where its evaluation here differs from its authors'), one note per model."""
    return [f"{label(config, m)} departs from its authors' evaluation: {config['models'][m]['departures'].strip()}"
            for m in models if config["models"][m].get("departures")]


def _index_of(values: list, v) -> int | None:
    """Index of ``v`` in ``values`` (the reference row of a table's contrasts), None when absent."""
    return values.index(v) if v in values else None


def _col(config, key):
    c = config["columns"][config["figures"][key]["column"]]
    return c["task"], c["metric"]


POINT_LABELS = {"llada": "own sampler (LLaDA generate)", "dream": "own sampler (Dream diffusion_generate)"}


def speed_point_specs(config: dict, models: list[str]) -> list[dict]:
    """The points the speed figures draw: each model at each of its speed points (plan_points.speed_points), labelled;
    a masked-diffusion model twice (its own sampler, and Fast-dLLM v1 with its cache and threshold)."""
    task = _col(config, "threshold")[0]
    out = []
    for m in models:
        points = plan_points.speed_points(config, m, task)
        for mode, dec in points:
            text = label(config, m)
            if len(points) > 1:
                text += (f" + Fast-dLLM v1 ({dec['cache']} cache, threshold {dec['threshold']:g})" if mode == "v1"
                         else f", {POINT_LABELS.get(mode, mode)}")
            out.append({"model": m, "label": text, "mode": mode, "decode": dec if mode not in ("ar", "bd") else None})
    return out


def fig1_notes(config: dict, models: list[str]) -> list[str]:
    """Figure 1a's departures: the Fast-dLLM v1 points' (``speed_v1.departures``) when a masked-diffusion model is
    drawn (the models' own departures are Table 1's tasks, not the figure's GSM8K)."""
    v1 = (config.get("speed_v1") or {}).get("departures")
    return [f"Fast-dLLM v1 points: {v1.strip()}"] if v1 and any(plan_points.is_mdm(config, m) for m in models) else []


def draw_figure(name: str, config: dict, png, pdf, acc=None, thr=None, gpu_frames=()) -> None:
    """Draw figure ``name``; a rehearsal's figures carry :data:`REHEARSAL_LABEL` above them and in their title
    metadata."""
    from analysis import plotting

    with plotting.labelled(REHEARSAL_LABEL if is_rehearsal(config) else None):
        _draw_figure(name, config, png, pdf, acc, thr, gpu_frames)


def _draw_figure(name: str, config: dict, png, pdf, acc=None, thr=None, gpu_frames=()) -> None:
    acc = acc if acc is not None else pd.DataFrame()
    thr = thr if thr is not None else pd.DataFrame()
    scale, f = config["scale"], config["figures"]
    abl, speed_bd, speed_ar = (plan.role(config, r) for r in ("ablation_bd", "speed_bd", "speed_ar"))
    if name == "fig1a_throughput_vs_accuracy":
        task, metric = _col(config, "threshold")
        F.fig1a_throughput_vs_accuracy(acc, thr, {"models": speed_point_specs(config, plan_points.fig1a_models(config)),
                                                  "ar_reference": speed_ar, "bd_reference": speed_bd,
                                                  "task": task, "metric": metric,
                                                  "speed_decode": plan_points.speed_decode(config), "batch": 1,
                                                  "sweep": FIGURE_SWEEPS[name],
                                                  "notes": fig1_notes(config, plan_points.fig1a_models(config))},
                                       scale, png, pdf)
    elif name == "fig1b_throughput_batch":
        F.fig1b_throughput_batch(thr, {"models": speed_point_specs(config, plan_points.fig1a_models(config)),
                                       "bd_model": speed_bd, "batches": f["batch"]["batches"],
                                       "speed_decode": plan_points.speed_decode(config), "sweep": FIGURE_SWEEPS[name]},
                                 scale, png, pdf)
    elif name == "fig_threshold_gsm8k":
        task, metric = _col(config, "threshold")
        F.fig_threshold_gsm8k(acc, thr, {"model": speed_bd, "label": label(config, speed_bd), "task": task,
                                         "metric": metric, "thresholds": f["threshold"]["thresholds"],
                                         "decode": plan_points.base_decode(config), "batch": f["threshold"]["batch"],
                                         "sweep": FIGURE_SWEEPS[name]},
                              scale, png, pdf)
    elif name == "fig_gpu_batch_throughput":
        frames = [d for d in [thr, *gpu_frames] if d is not None and not d.empty]
        allthr = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        F.fig_gpu_batch_throughput(allthr, {"ar_model": speed_ar, "bd_model": speed_bd,
                                            "ar_label": label(config, speed_ar), "bd_label": label(config, speed_bd),
                                            "decode": plan_points.gpu_batch_decode(config),
                                            "sweep": FIGURE_SWEEPS[name]}, png, pdf)
    elif name == "fig_subblock_accuracy":
        task, metric = _col(config, "subblock")
        F.fig_subblock_accuracy(acc, {"model": abl, "label": label(config, abl), "task": task, "metric": metric,
                                      "sub_blocks": f["subblock"]["sub_blocks"], "caches": f["subblock"]["caches"],
                                      "decode": plan_points.speed_decode(config)}, scale, png, pdf)
    elif name == "fig_subblock_throughput":
        F.fig_subblock_throughput(thr, {"model": abl, "label": label(config, abl),
                                        "sub_blocks": f["subblock"]["sub_blocks"],
                                        "caches": f["subblock"]["caches"], "batches": f["subblock"]["batches"],
                                        "decode": plan_points.speed_decode(config), "sweep": FIGURE_SWEEPS[name]},
                                  scale, png, pdf)
    elif name == "fig_attention_masks":
        F.fig_attention_masks(png, pdf, f["masks"]["seq_len"], f["masks"]["block_size"])
    else:
        raise ValueError(f"unknown figure {name!r}")


# ------------------------------------------------------------------------------------------------- summary page
def bench_paths(config: dict) -> str:
    """How the throughput rows decode (bench.ar_baseline, bench.decode_path), in words."""
    b = config["bench"]
    ar = {"hf": "Hugging Face generate", "hf_static": "HF static cache",
          "static": "static cache", "compiled": "static cache, compiled"}[b.get("ar_baseline", "hf")]
    return f"AR: {ar}; diffusion forwards: {b.get('decode_path', 'eager')}"


def summary_columns(config: dict) -> list[dict]:
    """The accuracy columns of the summary page: every paper column this scale fills with a task."""
    return [s for s in column_specs(config, [c for c in plan.AVG_COLUMNS if c in config["columns"]]) if "task" in s]


def summary_comparisons(config: dict) -> list[dict]:
    """The pairs the page compares: each Table 1 row with its baseline (labelled by its relation), each Table 2 row
    with the one above, and two diffusion rows of Table 1 trained here from the same base with the same data and
    budget (the block-diffusion recipe against full-attention diffusion; :func:`pairs.table1_pairs`)."""
    t2 = config["tables"]["table2"]["rows"]
    out = pairs.table1_pairs(config)
    out += [{"a": a["model"], "b": b["model"], "why": "Table 2: the recipe against the row above"}
            for a, b in zip(t2, t2[1:])]
    uniq = {}
    for c in out:  # each pair once, where it first comes
        uniq.setdefault((c["a"], c["b"]), c)
    return list(uniq.values())


def summary_sweeps(config: dict) -> list[dict]:
    """Tables 3 and 4 and Figure 4's threshold sweep, on the first seed, each against its reference setting."""
    t, f, base = config["tables"], config["figures"], plan_points.base_decode(config)
    abl, speed_bd = plan.role(config, "ablation_bd"), plan.role(config, "speed_bd")
    limit = config["eval"].get("sweep_limit")
    on = f"first {limit} test items" if limit else "every test item"
    train_block = config.get("training", {}).get("objective", {}).get("block_size", base["block_size"])
    thr_col = column_specs(config, [f["threshold"]["column"]])
    return [
        {"title": "Table 3: sub-block size", "model": abl, "columns": column_specs(config, t["table3"]["columns"]),
         "rows": [{"label": f"sub-block {s}", "decode": dict(base, sub_block_size=s)}
                  for s in t["table3"]["sub_blocks"]],
         "reference": _index_of(t["table3"]["sub_blocks"], base["sub_block_size"]),
         "reference_label": f"sub-block {base['sub_block_size']}",
         "note": f"Model {label(config, abl)} (first seed), {on}, block {base['block_size']}, threshold "
                 f"{base['threshold']}."},
        {"title": "Table 4: inference block size", "model": abl,
         "columns": column_specs(config, t["table4"]["columns"]),
         "rows": [{"label": f"block {b}", "decode": dict(base, block_size=b, sub_block_size=b)}
                  for b in t["table4"]["block_sizes"]],
         "reference": _index_of(t["table4"]["block_sizes"], train_block),
         "reference_label": f"block {train_block} (the training block size)",
         "note": f"Model {label(config, abl)} (first seed), {on}, sub-block = block, threshold {base['threshold']}."},
        {"title": "Figure 4: confidence threshold", "model": speed_bd, "columns": thr_col,
         "rows": [{"label": f"threshold {th:g}", "decode": dict(base, threshold=th)}
                  for th in f["threshold"]["thresholds"]],
         "reference": _index_of([float(x) for x in f["threshold"]["thresholds"]], float(base["threshold"])),
         "reference_label": f"threshold {float(base['threshold']):g}",
         "note": f"Model {label(config, speed_bd)} (first seed), {on} (the reference threshold on every item when "
                 "it is also Table 1's setting)."},
    ]


def summary_spec(config: dict) -> dict:
    """What the summary page (analysis.summary) shows for ``config``."""
    t1, t2 = config["tables"]["table1"]["rows"], config["tables"]["table2"]["rows"]
    models = list(dict.fromkeys([r["model"] for r in t1] + [r["model"] for r in t2]))
    groups = [dict(seed_group_spec(config, m, label(config, m)), label=label(config, m)) for m in models]
    stand_ins = ", ".join(f"{spec['title']} = {spec['task']}" for spec in summary_columns(config)
                          if not spec.get("comparable"))
    seeds = plan.adaptation_seeds(config)
    sp_models = [dict(p, source=p["model"]) for p in speed_point_specs(config, plan_points.fig1a_models(config))]
    sd = plan_points.speed_decode(config)
    return {
        "title": titled(config, f"What the DAG measured (scale: {config['scale']})"),
        "scale": config["scale"],
        "intro": scale_note(config) + (f" Stand-in tasks: {stand_ins}." if stand_ins else "") +
                 " Generated by the DAG (rule `summary`, analysis/summary.py) from the results CSVs of one run.",
        "groups": groups, "columns": summary_columns(config), "seeds": seeds,
        "items_note": (f"Rows of trained adaptations are means over the seeds {seeds} (all from the one AR base); "
                       "decoding as in Table 1." if len(seeds) > 1 else "Decoding as in Table 1."),
        "interval_note": " ".join(seed_notes(config, models)),
        "comparisons": summary_comparisons(config),
        "sweeps": summary_sweeps(config),
        "gaps": summary_pairs.gap_rows(config), "banner": REHEARSAL_LABEL if is_rehearsal(config) else None,
        "ar_base": plan.role(config, "main_ar"),
        "speed": {"sweep": "batch", "models": sp_models, "batches": config["figures"]["batch"]["batches"],
                  "pair": summary_pairs.speed_pair(config),
                  "note": f"diffusion at threshold {sd['threshold']:g}, sub-block cache "
                          f"{'on' if sd['use_sub_block_cache'] else 'off'}, {bench_paths(config)}; "
                          f"{config['bench']['num_prompts']} prompts, "
                          f"{config['bench']['max_new_tokens']} new tokens; first seed"},
    }
