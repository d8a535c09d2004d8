"""The shape of a study's summary, shared by its fit, its page and its figure: the keys of a row, its numeric
columns, the order of its rows, and the names and numbers as the page and the figure write them.

A summary row belongs to one base (the AR model a chain starts from), model, lever, lever value and budget; the
summary read back from its CSV (text, empty levers as NaN) is the same summary (:func:`read_back`).
"""
from __future__ import annotations

import math

import pandas as pd

KEYS = ["base", "model", "lever", "lever_value", "budget"]
# the gap quantities: to the row's own base, and block diffusion to the NTP arm of its base, lever and budget
GAPS = ("accuracy", "accuracy_vs_ntp")
NUMBERS = ["size_params", "pretrain", "pretrain_tokens", "budget", "budget_tokens", "n_params", "tokens_per_param",
           "pretrain_tokens_per_param", "passes", "final_loss", "seeds", "value", "ci_low", "ci_high", "n",
           "ref_value", "ref_low", "ref_high", "difference"]


def numeric(df: pd.DataFrame, cols) -> pd.DataFrame:
    """``df`` with each of ``cols`` it has as numbers (a cell that is not one: NaN)."""
    return df.assign(**{c: pd.to_numeric(df[c], errors="coerce") for c in cols if c in df})


def levers_as_text(df: pd.DataFrame) -> pd.DataFrame:
    """``lever`` and ``lever_value`` as text, empty for the models' own runs (read back from CSV as NaN) and for
    rows that have no such columns."""
    df = df.copy()
    for c in ("lever", "lever_value"):
        df[c] = df[c].astype(object).where(df[c].notna(), "").astype(str) if c in df else ""
    return df


def read_back(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary as :func:`analysis.study.summarize` returns it, from itself or from its CSV read back."""
    s = numeric(levers_as_text(summary), NUMBERS)
    s["base"] = s["base"].astype(str)
    return s


def base_rank(summary: pd.DataFrame) -> dict:
    """``{base: rank}``: the bases by parameters, then pretraining tokens, then name."""
    s = numeric(summary, ["size_params", "pretrain_tokens"]).drop_duplicates("base")
    s = s.assign(**{k: s[c].fillna(math.inf) if c in s else math.inf
                    for k, c in (("_p", "size_params"), ("_t", "pretrain_tokens"))})
    return {b: i for i, b in enumerate(s.sort_values(["_p", "_t", "base"])["base"])}


def ordered(rows: pd.DataFrame, rank: dict | None = None) -> pd.DataFrame:
    """``rows`` by model, lever, lever value, budget, then base (:func:`base_rank`); stable within."""
    rank = base_rank(rows) if rank is None else rank
    by = rows.assign(_rank=rows["base"].map(rank).fillna(len(rank)), _budget=pd.to_numeric(rows["budget"]))
    by = by.sort_values(["model", "lever", "lever_value", "_budget", "_rank"], kind="stable")
    return by.drop(columns=["_rank", "_budget"])


def fmt(v, digits=1, sign=False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def model_label(labels: dict | None, model: str, lever: str, value) -> str:
    """A model's display name (its config ``label``, or its key where none is given) with its lever, if any:
    ``bd_pad_cm [lr = 2e-05]``."""
    return (labels or {}).get(model, model) + (f" [{lever} = {value}]" if lever else "")


def series_label(key: dict, labels: dict | None, several_bases: bool) -> str:
    """A series' name in a legend, from its keys: the model and lever, its budget where the series runs along
    bases, its base where it runs along budgets and the study has several."""
    text = model_label(labels, key["model"], key["lever"], key["lever_value"])
    if "budget" in key:
        text += f" {int(key['budget'])}x"
    if "base" in key and several_bases:
        text += f" ({key['base']})"
    return text
