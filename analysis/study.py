"""A study of block diffusion against its AR bases: its rows read, its long summary, and the report a study's
rule writes (:func:`report`: the tidy CSVs, the fit, the Markdown page and the figure).

A study keeps per-snapshot rows under ``results/<study>/points/``: ``<snapshot>.accuracy.csv``,
``<snapshot>.speed.csv`` (the snapshot and its base timed in one job), ``<snapshot>.metrics.csv`` (training), and
``base.<base>.accuracy.csv`` for each base.  Every row carries the snapshot's fields; rows written before a field
existed are read with its default (:func:`with_defaults`).

Intervals follow the tables' conventions: a column over seeds is :func:`fastdllm_core.intervals.seed_interval`, the
average over columns has the half-widths added in quadrature over the number of columns, a base's column is its
Wilson interval, and a difference is "within noise" when the two intervals overlap.
"""
from __future__ import annotations

import math
import os

import pandas as pd

from analysis import study_cost, study_figure, study_fit, study_tables
from analysis.results_io import load_csvs, measured_on
from analysis.study_frame import KEYS, base_rank, levers_as_text, numeric, ordered
from analysis.summary import mean_interval
from fastdllm_core.intervals import intervals_overlap, seed_interval, wilson_pct
from fastdllm_core.provenance import write_csv_atomic, write_text_atomic

# the columns summarize() selects on in the speed and training rows (present even when no such rows exist yet)
SPEED_COLUMNS = ["side", "snapshot", "speedup_vs_main_ar"]
METRICS_COLUMNS = ["snapshot", "step", "passes", "loss"]
SUMMARY_COLUMNS = ["base", "size", "size_params", "pretrain", "pretrain_tokens", "model", "lever", "lever_value",
                   "budget", "budget_tokens", "n_params", "tokens_per_param", "pretrain_tokens_per_param", "passes",
                   "final_loss", "quantity", "column", "seeds", "value", "ci_low", "ci_high", "n", "ref_value",
                   "ref_low", "ref_high", "difference", "verdict"]
OUTPUTS = ("rows", "summary", "fit", "md", "png", "pdf")


def with_defaults(rows: pd.DataFrame, pretrain_tokens: int | None = None) -> pd.DataFrame:
    """``rows`` with the fields that rows written before them lack: ``base`` the row's ``size`` (each size had
    one base), ``pretrain`` 1 and ``pretrain_tokens`` the given default (the default base's), no lever (``lever``
    and ``lever_value`` empty).  A row with neither ``base`` nor ``size`` is refused."""
    rows = levers_as_text(rows)
    for col, default in (("base", None), ("pretrain", 1), ("pretrain_tokens", pretrain_tokens)):
        if col not in rows:
            rows[col] = None
        if default is not None:
            rows[col] = rows[col].fillna(default)
    if "size" in rows:
        rows["base"] = rows["base"].fillna(rows["size"])
    if rows["base"].isna().any():
        names = sorted(set(rows.loc[rows["base"].isna()].get("snapshot", pd.Series(["?"])).astype(str)))
        raise ValueError(f"rows without base or size (snapshots {', '.join(names)}): a study's rows carry both")
    rows["base"] = rows["base"].astype(str)
    return rows


def read_rows(paths, pretrain_tokens: int, columns=()) -> pd.DataFrame:
    """The rows of ``paths`` (one frame, as :func:`analysis.results_io.load_csvs` reads them; with no rows, the
    ``columns`` given) with :func:`with_defaults`."""
    return with_defaults(load_csvs(list(paths), list(columns) + ["base", "size"]), pretrain_tokens)


def _verdict(a: tuple, b: tuple) -> str:
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (*a, *b)):
        return ""
    if intervals_overlap(a[1:], b[1:]):
        return "within noise"
    return "above" if a[0] > b[0] else "below"


def _column_values(acc: pd.DataFrame, columns: dict, point: str) -> dict:
    """``{column: (values over seeds, n)}`` of one snapshot group at ``point``."""
    out = {}
    for cid, c in columns.items():
        sel = acc[(acc["task"] == c["task"]) & (acc["metric"] == c["metric"]) & (acc["point"] == point)
                  & (acc["status"] == "ok")]
        if len(sel):
            out[cid] = (sel.sort_values("train_seed")["value"].tolist(), int(sel["n"].min()))
    return out


def reference(rows: pd.DataFrame, columns: dict) -> dict:
    """One base's ``{column: (value, low, high)}`` (Wilson intervals) and its Avg."""
    rows = numeric(rows, ["value", "n"])
    out = {}
    for cid, c in columns.items():
        sel = rows[(rows["task"] == c["task"]) & (rows["metric"] == c["metric"]) & (rows["status"] == "ok")]
        if len(sel):
            v, n = float(sel["value"].iloc[0]), int(sel["n"].iloc[0])
            out[cid] = (v, *wilson_pct(v, n))
    if out and len(out) == len(columns):
        out["avg"] = mean_interval(list(out.values()))
    return out


def _rows(base: dict, quantity: str, cols: dict, ref: dict) -> list[dict]:
    """Summary rows of one quantity: each column over seeds beside its reference, and their average."""
    rows = []
    parts = {cid: seed_interval([float(v) for v in values], int(n)) for cid, (values, n) in cols.items()}
    if parts:
        parts["avg"] = mean_interval([parts[c] for c in cols])
    for cid, iv in parts.items():
        r = ref.get(cid)
        seeds = len(cols[cid][0]) if cid in cols else min(len(v) for v, _ in cols.values())
        rows.append(dict(base, quantity=quantity, column=cid, seeds=seeds, value=iv[0], ci_low=iv[1],
                         ci_high=iv[2], n=cols[cid][1] if cid in cols else "",
                         ref_value=r[0] if r else None, ref_low=r[1] if r else None, ref_high=r[2] if r else None,
                         difference=iv[0] - r[0] if r else None, verdict=_verdict(iv, r) if r else ""))
    return rows


def _tokens_per_forward(acc: pd.DataFrame, point: str) -> float | None:
    """Generated tokens over the forwards each sequence took, over every generation task of ``point`` and every
    snapshot of the group: each task row's forwards are its tokens over its ``tokens_per_forward`` (``nfe`` counts
    batched forwards, not a sequence's), as the evaluation's shards merge them."""
    sel = numeric(acc[acc["point"] == point], ["total_tokens", "tokens_per_forward"])
    sel = sel[sel["tokens_per_forward"] > 0].drop_duplicates(["snapshot_model", "task"])
    forwards = (sel["total_tokens"] / sel["tokens_per_forward"]).sum()
    return float(sel["total_tokens"].sum() / forwards) if len(sel) else None


def _number(v):
    """A cell as an int where it is a whole number, as a float otherwise, None where empty."""
    if v is None or pd.isna(v):
        return None
    return int(v) if float(v).is_integer() else float(v)


def _base_fields(first) -> dict:
    """The fields of a base that every summary row of it carries (from one of its rows)."""
    params, tokens = _number(first.get("size_params")), _number(first.get("pretrain_tokens"))
    return dict(size=first.get("size"), size_params=params, pretrain=_number(first.get("pretrain")),
                pretrain_tokens=tokens, pretrain_tokens_per_param=tokens / params if tokens and params else None)


def _base_rows(bases: pd.DataFrame, columns: dict) -> tuple[dict, list[dict]]:
    """``({base: reference}, the summary's base rows)``: each base's own accuracy, bases in :func:`base_rank`
    order."""
    refs, rows = {}, []
    for b in base_rank(bases):
        g = bases[bases["base"] == b]
        refs[b] = reference(g, columns)
        fields = dict(base=b, **_base_fields(g.iloc[0]), model="base", lever="", lever_value="", budget=0)
        for col, v in refs[b].items():
            c = columns.get(col)
            sel = g[(g["task"] == c["task"]) & (g["metric"] == c["metric"])] if c else g.iloc[:0]
            rows.append(dict(fields, quantity="base", column=col, value=v[0], ci_low=v[1], ci_high=v[2],
                             n=int(sel["n"].iloc[0]) if len(sel) else ""))
    return refs, rows


def _group_fields(key: tuple, g: pd.DataFrame, metrics: pd.DataFrame) -> dict:
    """A snapshot group's keys and fields: its base's, its tokens, parameters and training (the last step of each
    snapshot, averaged over the group)."""
    fields = dict(zip(KEYS, key), **_base_fields(g.iloc[0]))
    fields["budget"] = _number(fields["budget"])
    last = metrics[metrics["snapshot"].isin(g["snapshot"])].sort_values("step").groupby("snapshot").tail(1)
    tokens = int(g["budget_tokens"].iloc[0])
    fields.update(budget_tokens=tokens, tokens_per_param=tokens / float(g["size_params"].iloc[0]),
                  n_params=_number(g["n_params"].iloc[0]) if "n_params" in g else None,
                  passes=float(last["passes"].mean()) if len(last) else None,
                  final_loss=float(last["loss"].mean()) if len(last) else None)
    return fields


def _group_rows(fields: dict, g: pd.DataFrame, speed: pd.DataFrame, ref: dict, columns: dict,
                points: dict) -> tuple[list[dict], tuple]:
    """One snapshot group's rows (``accuracy`` against its base; for block diffusion ``accuracy_speed`` against
    its own accuracy setting and ``tokens_per_forward``; ``speedup_b1``) and its arm: ``(fields, block diffusion?,
    its columns at the accuracy point, its accuracy rows)``."""
    bd = (g["mode"] == "bd").any()
    cols = _column_values(g, columns, points["accuracy"] if bd else "ar")
    accuracy = _rows(fields, "accuracy", cols, ref)
    rows = list(accuracy)
    if bd:
        own = {r["column"]: (r["value"], r["ci_low"], r["ci_high"]) for r in accuracy}
        rows += _rows(fields, "accuracy_speed", _column_values(g, columns, points["speed"]), own)
        rows.append(dict(fields, quantity="tokens_per_forward", column="all",
                         value=_tokens_per_forward(g, points["speed"]), seeds=g["train_seed"].nunique()))
    s = speed[(speed["side"] == "snapshot") & speed["snapshot"].isin(g["snapshot"])]
    if len(s):
        v = s["speedup_vs_main_ar"].tolist()
        rows.append(dict(fields, quantity="speedup_b1", column="all", value=sum(v) / len(v), ci_low=min(v),
                         ci_high=max(v), seeds=len(v)))
    return rows, (fields, bd, cols, accuracy)


def _versus_ntp(arms: dict) -> list[dict]:
    """``accuracy_vs_ntp`` rows: each block-diffusion arm of a base, lever and budget against the one AR-adapted
    (NTP) arm of the same base, lever and budget (none where there is no such arm, or more than one)."""
    rows = []
    for group in arms.values():
        ntp = [accuracy for _, bd, _, accuracy in group if not bd]
        if len(ntp) != 1:
            continue
        own = {r["column"]: (r["value"], r["ci_low"], r["ci_high"]) for r in ntp[0]}
        rows += [r for fields, bd, cols, _ in group if bd for r in _rows(fields, "accuracy_vs_ntp", cols, own)]
    return rows


def summarize(acc: pd.DataFrame, speed: pd.DataFrame, metrics: pd.DataFrame, bases: pd.DataFrame, columns: dict,
              points: dict) -> pd.DataFrame:
    """The long summary: per base, ``base`` rows (its own accuracy); then per base, model, lever, lever value and
    budget, ``accuracy`` (against its own base), ``accuracy_speed`` (block diffusion at ``points['speed']`` against
    itself at ``points['accuracy']``), ``tokens_per_forward`` at the speed setting and ``speedup_b1`` (batch-1
    tokens/s over its base's); last, ``accuracy_vs_ntp`` (block diffusion against the NTP arm of the same base,
    lever and budget).  Groups in :func:`analysis.study_frame.ordered` order.  The rows have their defaults
    (:func:`with_defaults`); ``speed`` and ``metrics`` at least :data:`SPEED_COLUMNS` and :data:`METRICS_COLUMNS`."""
    bases = numeric(with_defaults(bases), ["value", "n", "size_params", "pretrain", "pretrain_tokens"])
    refs, rows = _base_rows(bases, columns)
    acc = numeric(with_defaults(acc), ["value", "n", "budget", "train_seed", "n_params", "size_params",
                                       "budget_tokens", "pretrain", "pretrain_tokens"])
    speed = numeric(speed, ["speedup_vs_main_ar"])
    metrics = numeric(metrics, ["step", "passes", "loss"])
    if acc.empty:  # no snapshot has rows yet: the bases alone
        return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    acc = acc.rename(columns={"model": "snapshot_model"}).rename(columns={"model_group": "model"})
    groups = dict(list(acc.groupby(KEYS, sort=False)))
    rank = dict(base_rank(bases), **{b: len(refs) for b in acc["base"] if b not in refs})
    keys = ordered(pd.DataFrame(list(groups), columns=KEYS), rank).itertuples(index=False, name=None)
    arms, grouped = {}, []
    for key in keys:
        fields = _group_fields(key, groups[key], metrics)
        more, arm = _group_rows(fields, groups[key], speed, refs.get(fields["base"], {}), columns, points)
        grouped += more
        arms.setdefault(tuple(fields[k] for k in ("base", "lever", "lever_value", "budget")), []).append(arm)
    return pd.DataFrame(rows + grouped + _versus_ntp(arms), columns=SUMMARY_COLUMNS)


def _folder(paths) -> str:
    """The folder the rows were read from (the common one of ``paths``)."""
    folders = [os.path.dirname(p) for p in paths]
    return os.path.commonpath(folders) if folders else "its points folder"


def report(accuracy, speed, metrics, bases, builds=(), *, name: str, x: str, title: str, describe: str, missing: list,
           columns: dict, points: dict, labels: dict, pretrain_tokens: int, threshold: float, rows, summary, fit,
           md, png, pdf) -> str:
    """A study's report from its rows (``accuracy``, ``speed``, ``metrics``, ``bases``, and ``builds``, the build rows
    of the bases it built: lists of CSV paths): every accuracy row (``rows``), the summary (``summary``), the fit of
    each gap against ``x`` (:data:`analysis.study_axis.AXES`; ``fit``), the page titled ``title`` (``md``) and the
    figure (``png``, ``pdf``).  ``name``: the study's target; ``describe``: the study in words; ``missing``: its
    planned snapshots without rows; ``columns``: ``{column: {task, metric}}`` averaged; ``points``: the decoding
    points read (``accuracy``, ``speed``); ``labels``: ``{model: display name}``; ``pretrain_tokens``: the default
    for rows written before the field; ``threshold``: the speed setting's.  Returns the page without its title."""
    acc, base_rows = read_rows(accuracy, pretrain_tokens), read_rows(bases, pretrain_tokens)
    speed_rows = read_rows(speed, pretrain_tokens, SPEED_COLUMNS)
    metric_rows = read_rows(metrics, pretrain_tokens, METRICS_COLUMNS)
    write_csv_atomic(rows, acc.to_dict("records"))
    table = summarize(acc, speed_rows, metric_rows, base_rows, columns, points)
    fits = study_fit.fit(table, x)
    write_csv_atomic(summary, table.to_dict("records"))
    write_csv_atomic(fit, fits.to_dict("records"))
    commits = sorted(set(acc["git_commit"].astype(str))) if "git_commit" in acc and len(acc) else []
    provenance = (f"Accuracy {measured_on(acc)}; speed {measured_on(speed_rows)}; code at commit(s) "
                  f"{', '.join(c[:12] for c in commits) or 'n/a'}. The study: {describe}. Regenerate: `snakemake "
                  f"--cores all {name}_study` (rows under {_folder(list(accuracy) + list(bases))} are kept; a deleted "
                  "one is remade).")
    cost = study_cost.markdown(load_csvs(list(builds)), table)
    text = study_tables.markdown(table, fits, missing, threshold, provenance, labels, x, cost)
    write_text_atomic(md, f"# {title}\n\n" + text)
    study_figure.figure(table, fits, png, pdf, x, threshold, provenance, labels)
    return text
