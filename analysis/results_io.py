"""Reading the tidy results CSVs and selecting measurements from them."""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pandas as pd

from fastdllm_core.decode_config import TRUE_WORDS
from fastdllm_core.intervals import finite_float

BOOL_KEYS = ("use_sub_block_cache", "logits_eos_inf", "confidence_eos_eot_inf")


def load_csv(path) -> pd.DataFrame:
    """A results CSV as a DataFrame (empty when the file does not exist or has no rows)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return pd.DataFrame()
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def load_csvs(paths, columns=()) -> pd.DataFrame:
    """Several results CSVs (a table's or figure's per-job inputs) as one DataFrame, read exactly as the one CSV
    that ``collect.py`` concatenates of them would be: rows in the order given, columns the union in first-seen
    order, missing cells empty.  With no rows: an empty frame with ``columns`` (those its reader selects on)."""
    rows: list[dict] = []
    for p in paths:
        with open(p, newline="") as fh:
            rows += list(csv.DictReader(fh))
    if not rows:
        return pd.DataFrame(columns=list(columns))
    columns = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows({k: r.get(k, "") for k in columns} for r in rows)
    return pd.read_csv(io.StringIO(buf.getvalue()), keep_default_na=False, na_values=[""])


def load_throughput(path) -> pd.DataFrame:
    """A throughput CSV without its ``n/a`` rows (a model of the sweep that could not be loaded: ``status`` not
    ``ok``, the reason in ``note``, no measurement): the figures and the summary draw the measured rows only.
    A list of paths is read as one CSV (:func:`load_csvs`)."""
    df = load_csvs(path) if isinstance(path, (list, tuple)) else load_csv(path)
    if not df.empty and "status" in df.columns:
        df = df[df["status"].fillna("ok").astype(str) == "ok"].reset_index(drop=True)
    return df


def to_bool(v) -> bool:
    """A CSV cell as a boolean, leniently: a word of :data:`~fastdllm_core.decode_config.TRUE_WORDS` is True, any other
    string, an empty cell or NaN False."""
    if isinstance(v, str):
        return v.strip().lower() in TRUE_WORDS
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False
    return bool(v)


def _matches(row, decode: dict) -> bool:
    for k, want in decode.items():
        if k not in row or want is None:
            continue
        got = row[k]
        if got is None or (isinstance(got, float) and math.isnan(got)) or str(got).strip() == "":
            continue  # an empty cell: the setting does not apply to this measurement (a likelihood task's length)
        g, w = finite_float(got), finite_float(want)
        if k in BOOL_KEYS:
            same = to_bool(got) == to_bool(want)
        elif g is not None and w is not None:
            same = abs(g - w) <= 1e-9
        else:
            same = str(got).strip().lower() == str(want).strip().lower()  # words: alg, remasking, cache, "none"
        if not same:
            return False
    return True


def select(df: pd.DataFrame, decode: dict | None = None, **equal) -> pd.DataFrame:
    """Rows whose columns equal ``equal`` (strings compared as strings) and whose decode parameters match
    ``decode`` (numbers as numbers, booleans as booleans, words as words; AR rows, ``mode == 'ar'``, ignore the
    decode filter)."""
    if df.empty:
        return df
    mask = pd.Series(True, index=df.index)
    for k, v in equal.items():
        if k not in df.columns:
            return df.iloc[0:0]
        mask &= df[k].astype(str) == str(v)
    out = df[mask]
    if decode and not out.empty:
        keep = [i for i, r in out.iterrows()
                if str(r.get("mode", "bd")) == "ar" or _matches(r, decode)]
        out = out.loc[keep]
    return out


def lookup(df: pd.DataFrame, value_col: str = "value", decode: dict | None = None, **equal):
    """``(value, note)`` of the last matching measurement: value is None when there is none or when its
    status is not ``ok`` (note then says why)."""
    rows = select(df, decode, **equal)
    if rows.empty and "metric" in equal:
        # a task that could not run at all has one row with status != ok and no per-metric rows
        rest = {k: v for k, v in equal.items() if k != "metric"}
        failed = select(df, decode, **rest)
        if "status" in failed.columns:
            rows = failed[failed["status"].astype(str) != "ok"]
    if rows.empty:
        return None, "no measurement in the results CSV"
    r = rows.iloc[-1]
    status = str(r.get("status", "ok") or "ok")
    if status != "ok":
        return None, str(r.get("note", "") or "").strip() or f"status {status}"
    v = finite_float(r.get(value_col))
    if v is None:
        return None, f"no numeric {value_col}"
    return v, ""


def _of_sweep(thr: pd.DataFrame, sweep: str | None) -> pd.DataFrame:
    """The rows of throughput sweep ``sweep`` (the CSV's ``sweep`` column).  The same model and decoding setting
    can be measured by several sweeps (Figure 1's batch-1 run and Figure 6's sub-block-8 run, say); a figure takes
    its numbers from its own sweep, whose runs were measured together, never from whichever row comes last.
    Rows without a sweep name (CSVs written outside the DAG) are kept."""
    if sweep is None or thr.empty or "sweep" not in thr.columns:
        return thr
    return thr[thr["sweep"].isna() | (thr["sweep"].astype(str) == sweep)]


def measured_on(rows: pd.DataFrame, sweep: str | None = None, models=None) -> str:
    """The device(s) the speeds drawn were measured on, from the rows' ``device_name`` and ``device_type``
    (the figure's sweep and, when given, its models): ``"measured on <name> (<type>)"``, several joined by ``;``;
    ``"device not recorded"`` when the rows carry no device columns."""
    rows = _of_sweep(rows, sweep)
    if models is not None and not rows.empty and "model" in rows.columns:
        rows = rows[rows["model"].astype(str).isin([str(m) for m in models])]
    if rows.empty or "device_name" not in rows.columns:
        return "device not recorded"
    types = rows["device_type"] if "device_type" in rows.columns else pd.Series([""] * len(rows), index=rows.index)
    pairs = dict.fromkeys(f"{n} ({t})" if str(t) and str(t) != "nan" else str(n)
                          for n, t in zip(rows["device_name"].astype(str), types.astype(str)) if n and n != "nan")
    return "measured on " + "; ".join(pairs) if pairs else "device not recorded"
