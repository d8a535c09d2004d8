"""What each base a study built cost to train: its build rows (``results/<study>/points/base.<base>.build.csv``,
written with its release: the metrics rows of both training stages, one per logged interval) as one table.

A stage's training time is the sum over its logged intervals of the interval's tokens over the tokens per second
measured across it (:class:`fastdllm_core.training.run_book._Clock`): the time the steps took, checkpoints included,
model loading and scoring not.  Across a resume, the interval that spans it is counted at the rate measured after
it, so a stopped and resumed stage costs what an uninterrupted one would have.
"""
from __future__ import annotations

import pandas as pd

from analysis.study_frame import fmt, numeric

COLUMNS = ["base", "stage", "steps", "tokens", "hours", "tokens_per_s", "processes", "cpu"]


def stage_seconds(rows: pd.DataFrame) -> float:
    """One stage's training seconds from its metrics rows (``step``, ``tokens_seen``, ``tokens_per_s``)."""
    r = numeric(rows, ["step", "tokens_seen", "tokens_per_s"]).sort_values("step")
    tokens = r["tokens_seen"].diff().fillna(r["tokens_seen"])
    if (r["tokens_per_s"] <= 0).any() or r["tokens_per_s"].isna().any():
        raise ValueError(f"metrics rows without a positive tokens_per_s (steps "
                         f"{', '.join(str(int(s)) for s in r.loc[~(r['tokens_per_s'] > 0), 'step'])})")
    return float((tokens / r["tokens_per_s"]).sum())


def cost(builds: pd.DataFrame) -> pd.DataFrame:
    """One row per built base and stage (:data:`COLUMNS`), in the rows' order of bases."""
    out = []
    for (base, stage), g in builds.groupby(["base", "stage"], sort=False):
        r = numeric(g, ["step", "tokens_seen", "tokens_per_s", "world_size", "torch_threads"])
        last = r.sort_values("step").iloc[-1]
        out.append({"base": str(base), "stage": str(stage), "steps": int(last["step"]),
                    "tokens": int(last["tokens_seen"]), "hours": stage_seconds(g) / 3600,
                    "tokens_per_s": float(r["tokens_per_s"].median()),
                    "processes": f"{int(last['world_size'])} x {int(last['torch_threads'])} thread",
                    "cpu": str(last.get("cpu", ""))})
    return pd.DataFrame(out, columns=COLUMNS)


def markdown(builds: pd.DataFrame, summary: pd.DataFrame) -> list[str]:
    """The page's cost section: per built base, each stage's steps, tokens, hours and median tokens/s, and the
    total; nothing when the study built no base (it adapts released ones)."""
    if builds.empty:
        return []
    table = cost(builds)
    order = list(dict.fromkeys(table["stage"]))  # pretraining, then SFT, as the release writes them
    per_param = summary[summary["quantity"] == "base"].drop_duplicates("base").set_index("base")
    head = ["base", "pretraining tokens / param", *(f"{s}: steps, tokens, hours" for s in order), "total hours",
            "median tokens/s (pretraining)", "processes", "CPU"]
    lines = ["## Cost of the bases it built", "",
             "Training time per stage: each logged interval's tokens over the tokens per second measured across it, "
             "summed (model loading, rounding and scoring not counted); from the build rows written with each "
             "release (`base.<base>.build.csv`).", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for base, g in table.groupby("base", sort=False):
        stages = {r["stage"]: r for _, r in g.iterrows()}
        cells = [f"{int(stages[s]['steps']):,}, {stages[s]['tokens'] / 1e6:.2f}M, {stages[s]['hours']:.2f}"
                 if s in stages else "n/a" for s in order]
        first = g.iloc[0]
        pre = stages.get("pretrain", first)
        ratio = per_param["pretrain_tokens_per_param"].get(base) if "pretrain_tokens_per_param" in per_param else None
        lines.append("| " + " | ".join([base, fmt(ratio, 2), *cells, f"{g['hours'].sum():.2f}",
                                         f"{pre['tokens_per_s']:,.0f}", pre["processes"], pre["cpu"]]) + " |")
    return lines + [""]
