"""What a run of the DAG found, as one Markdown page: a pure function of the results CSVs and a spec made from the
config (``workflow/fastdllm_dag/job/report_specs.summary_spec``).

Every number the README quotes about the embedded default comes from this page: the DAG writes it as
``results/<scale>/summary.md`` with its picture ``summary.png`` beside it (rule ``summary``), and
``scripts/update_results_doc.py`` copies both of a clean run of one commit to ``docs/`` and the page's findings,
picture and accuracy means into the README.  The page has four kinds of sections:

* ``## Findings``: one sentence per comparison and one from the batch sweep's timing rounds
  (:mod:`analysis.summary_findings`), restating the sections below in words;
* the measurements (accuracy with intervals, the comparisons and their verdicts, the decoding sweeps, final
  training losses): the same code on the same kernel path gives the same text (:func:`comparable_text`);
* ``## Provenance``: the commit, versions and machine of the run, and the picture's sha256;
* ``## Speed (timing)`` and ``## Training speed (timing)``: tokens per second and wall times, which vary from run to
  run and are never compared.
"""
from __future__ import annotations

import pandas as pd

from fastdllm_core.intervals import wilson_pct

from .results_io import lookup, measured_on, select
from .summary_findings import findings_section, interval_text, judge
from .tables import group_decode, markdown_table, seed_mean

FINDINGS, PROVENANCE = "## Findings", "## Provenance"
TIMING, TRAINING_SPEED = "## Speed (timing)", "## Training speed (timing)"
# never compared between runs: provenance and timing vary from run to run; the findings restate the compared
# sections below them in words (and add the timing rounds' verdict), and pages made before them have none
NOT_COMPARED = (FINDINGS, PROVENANCE, TIMING, TRAINING_SPEED)
NA = "n/a"
PICTURE_LINE = "- picture: "


# ------------------------------------------------------------------------------------------------- cells
def measure(acc: pd.DataFrame, members: list[str], task: str, metric: str, decode: dict | None) -> dict:
    """``{mean, lo, hi, values, n, why}`` of one metric over a group's seed replicates (or one model)."""
    values = []
    for m in members:
        v, why = lookup(acc, "value", decode, model=m, task=task, metric=metric)
        if v is None:
            return {"mean": None, "why": f"{m}: {why}"}
        values.append(v)
    n, _ = lookup(acc, "n", decode, model=members[0], task=task, metric=metric)
    if len(members) == 1:
        lo, hi = wilson_pct(values[0], int(n))
        return {"mean": values[0], "lo": lo, "hi": hi, "values": values, "n": int(n), "why": ""}
    mean, lo, hi, why = seed_mean(acc, members, task, metric, decode)
    return {"mean": mean, "lo": lo, "hi": hi, "values": values, "n": int(n), "why": why}


def average_cell(parts: list[dict]) -> dict:
    """The Avg. column (Table 1's): the mean of the columns' means, their half-widths added in quadrature over
    their count; per seed, the mean of that seed's columns."""
    if not parts or any(p.get("mean") is None for p in parts):
        return {"mean": None, "why": "a column is n/a"}
    mean, lo, hi = mean_interval([(p["mean"], p["lo"], p["hi"]) for p in parts])
    values = [sum(v) / len(parts) for v in zip(*(p["values"] for p in parts))]
    return {"mean": mean, "lo": lo, "hi": hi, "values": values, "n": parts[0]["n"], "why": ""}


def mean_interval(parts: list[tuple]) -> tuple[float, float, float]:
    """``(mean, lo, hi)`` of several columns' ``(mean, lo, hi)``: the mean of their means, their half-widths added
    in quadrature over their count (the Avg. column of every table and study)."""
    k = len(parts)
    mean = sum(p[0] for p in parts) / k
    half = sum(((p[2] - p[1]) / 2) ** 2 for p in parts) ** 0.5 / k
    return mean, mean - half, mean + half


def cell(c: dict) -> str:
    return NA if c.get("mean") is None else interval_text(c)


def verdict(a: dict, b: dict) -> str:
    """``b - a`` and whether it is a finding: the two 95% intervals do not overlap."""
    j = judge(a, b)
    if j is None:
        return NA
    return f"{j['d']:+.1f} ({j['direction']}, beyond noise)" if j["apart"] else f"{j['d']:+.1f} (within noise)"


def item_counts(cells: dict) -> list[int]:
    """The test-item counts of the page's cells."""
    return sorted({c.get("n") for c in cells.values() if c.get("n")})


# ------------------------------------------------------------------------------------------------- sections
def _accuracy(spec: dict, cells: dict) -> list[str]:
    cols = spec["columns"]
    rows = [[g["label"], str(len(g["members"]))] + [cell(cells[(g["model"], c["id"])]) for c in cols]
            for g in spec["groups"]]
    ns = item_counts(cells)
    out = ["## Accuracy (Tables 1 and 2)", "",
           f"{spec['items_note']} n = {', '.join(map(str, ns)) or NA} test items per task. {spec['interval_note']} "
           f"Avg.: the mean of the {len(cols) - 1} columns before it (the paper's Table 1 Avg. also counts GPQA), "
           "their half-widths added in quadrature over their count. How these gaps change with the adaptation "
           "budget: docs/budget_study.md (`snakemake --cores all budget_study`); with model size: "
           "docs/scale_study.md (`snakemake --cores all scale_study`).", ""]
    out += markdown_table(["model", "seeds"] + [c["title"] for c in cols], rows)
    if any(len(g["members"]) > 1 for g in spec["groups"]):
        out += ["", "Per seed (" + ", ".join(map(str, spec["seeds"])) + "):", ""]
        seeds = [[g["label"]] + [" / ".join(f"{v:.1f}" for v in cells[(g["model"], c["id"])].get("values", [])) or NA
                                 for c in cols] for g in spec["groups"] if len(g["members"]) > 1]
        out += markdown_table(["model"] + [c["title"] for c in cols], seeds)
    return out


def _comparisons(spec: dict, cells: dict) -> list[str]:
    out = ["## Comparisons", "",
           "Each line is `b - a` per column; a difference is a finding (\"beyond noise\") only when the two 95% "
           "intervals do not overlap.", ""]
    label = {g["model"]: g["label"] for g in spec["groups"]}
    for comp in spec["comparisons"]:
        a, b = comp["a"], comp["b"]
        parts = [f"{c['title']} {verdict(cells[(a, c['id'])], cells[(b, c['id'])])}" for c in spec["columns"]]
        found = [p for p in parts if "beyond noise" in p]
        head = f"- **{label[b]} - {label[a]}** ({comp['why']}): "
        out.append(head + "; ".join(parts) + f". Beyond noise: {len(found)} of {len(parts)} columns.")
    return out


def _sweeps(spec: dict, acc: pd.DataFrame) -> list[str]:
    out = ["## Decoding sweeps", ""]
    for sw in spec["sweeps"]:
        cols, ref = sw["columns"], sw.get("reference")
        measured = [[measure(acc, [sw["model"]], c["task"], c["metric"], r["decode"]) for c in cols]
                    for r in sw["rows"]]
        rows = []
        for i, (r, cs) in enumerate(zip(sw["rows"], measured)):
            tpf, _ = lookup(acc, "tokens_per_forward", r["decode"], model=sw["model"], task=cols[0]["task"],
                            metric=cols[0]["metric"])
            vs = "-" if ref is None else "reference" if i == ref else \
                "; ".join(verdict(a, b) for a, b in zip(measured[ref], cs))
            rows.append([r["label"]] + [cell(c) for c in cs] + [f"{tpf:.2f}" if tpf is not None else NA, vs])
        out += [f"### {sw['title']}", "", sw["note"], ""]
        out += markdown_table(["setting"] + [c["title"] for c in cols] +
                              [f"tokens per forward ({cols[0]['title']})", f"vs {sw['reference_label']}"], rows) + [""]
    return out


def _training(train: pd.DataFrame) -> list[str]:
    out = ["## Training (final logged step)", ""]
    if train.empty:
        return out + ["No model was trained in this run."]
    rows = []
    for model, g in train.groupby("model", sort=False):
        last = g.iloc[-1]
        rows.append([str(model), str(last.get("recipe", "")), str(last.get("step", "")), f"{float(last['loss']):.4f}"])
    return out + markdown_table(["model", "recipe", "steps", "loss"], rows)


def _provenance(spec: dict, frames: list[pd.DataFrame], fingerprint: str,
                picture: tuple[str, str] | None) -> list[str]:
    def values(col):
        vs = sorted({str(v) for d in frames if col in d.columns for v in d[col].dropna().unique() if str(v)})
        return ", ".join(vs) or NA

    out = [PROVENANCE, "",
           f"- commit: {values('git_commit')}",
           f"- source fingerprint: {fingerprint or NA} "
           "(fastdllm_core.provenance.source_fingerprint of the code that ran)",
           f"- scale: {spec['scale']}",
           f"- CPU: {values('cpu')}; kernel path: {values('cpu_isa')} (MKL_CBWR={values('mkl_cbwr')})",
           f"- torch {values('torch_version')}, transformers {values('transformers_version')}, "
           f"python {values('python_version')}",
           f"- devices: {values('device_type')} ({values('device_name')})"]
    if picture:  # its bytes depend on matplotlib and its fonts, so it is recorded here, never compared
        out.append(f"{PICTURE_LINE}{picture[0]}, sha256 {picture[1]} (analysis/fig_findings.py, drawn from this "
                   "page's accuracy cells)")
    return out


def _timing(spec: dict, thr: pd.DataFrame, train: pd.DataFrame, extra: list[str]) -> list[str]:
    out = [TIMING, "", "Measured speeds vary between runs and machines; they are never compared between runs.", ""]
    sp = spec["speed"]
    rows = []
    for m in sp["models"]:
        for b in sp["batches"]:
            sel = select(thr, m.get("decode"), model=m["source"], mode=m["mode"], sweep=sp["sweep"], batch_size=b)
            if sel.empty:
                continue
            r = sel.iloc[-1]
            rows.append([m["label"], m["mode"], str(b), f"{float(r['tokens_per_s']):.1f}",
                         f"{float(r['tokens_per_forward']):.2f}",
                         f"{float(r['speedup_vs_main_ar']):.2f}x" if str(r.get("speedup_vs_main_ar", "")) not in
                         ("", "nan") else "-"])
    if rows:
        dev = measured_on(thr, sp["sweep"], [m["source"] for m in sp["models"]])
        out += [f"Throughput sweep `{sp['sweep']}` ({sp['note']}), {dev}:", ""]
        out += markdown_table(["model", "mode", "batch", "tokens/s", "tokens per forward", "vs AR"], rows) + [""]
    out += ([""] + extra if extra else [])
    if not train.empty and "tokens_per_s" in train.columns:
        tr = [[str(m), f"{pd.to_numeric(g['tokens_per_s'], errors='coerce').median():.0f}"]
              for m, g in train.groupby("model", sort=False)]
        out += ["", TRAINING_SPEED, "", "Median tokens/s over the logged intervals (two adaptations train side by "
                f"side, one thread each), {measured_on(train)}:", ""] + markdown_table(["model", "tokens/s"], tr)
    return out


def summary_cells(spec: dict, acc: pd.DataFrame) -> tuple[dict, dict]:
    """(the spec with the Avg. column added, ``{(model, column id): cell}``) of the page's accuracy table: what the
    accuracy, comparisons and findings sections and the picture (analysis/fig_findings.py) are drawn from."""
    cells = {(g["model"], c["id"]): measure(acc, g["members"], c["task"], c["metric"], group_decode(g, c["task"]))
             for g in spec["groups"] for c in spec["columns"]}
    for g in spec["groups"]:
        cells[(g["model"], "avg")] = average_cell([cells[(g["model"], c["id"])] for c in spec["columns"]])
    return dict(spec, columns=list(spec["columns"]) + [{"id": "avg", "title": "Avg."}]), cells


def build_summary(spec: dict, acc: pd.DataFrame, thr: pd.DataFrame, train: pd.DataFrame,
                  timing_lines: list[str] | None = None, fingerprint: str = "",
                  picture: tuple[str, str] | None = None) -> str:
    """The page (Markdown).  ``timing_lines``: extra lines for the timing section (the DAG's wall time);
    ``fingerprint``: the source fingerprint of the code that made the results; ``picture``: (file name, sha256)
    of the findings' picture drawn beside the page, recorded in its provenance."""
    spec, cells = summary_cells(spec, acc)
    lines = [f"# {spec['title']}", "", spec["intro"], ""]
    lines += findings_section(spec, cells, thr, item_counts(cells)) + [""]
    lines += _accuracy(spec, cells) + [""]
    lines += _comparisons(spec, cells) + [""]
    lines += _sweeps(spec, acc)
    lines += _training(train) + [""]
    lines += _provenance(spec, [acc, thr, train], fingerprint, picture) + [""]
    lines += _timing(spec, thr, train, timing_lines or [])
    return "\n".join(lines).rstrip() + "\n"


def comparable_text(md: str) -> str:
    """The page's measurements: its headings, table rows and list lines (the comparisons), without the findings,
    provenance and timing sections (:data:`NOT_COMPARED`) and without prose (a caption may be reworded without a
    number moving): equal for two runs of the same code on the same kernel path, and comparable with a page made
    before the findings section existed (what ``tests/test_results_doc.py`` and ``scripts/update_results_doc.py
    --check`` compare)."""
    out = [line for h, line in sectioned(md) if h not in NOT_COMPARED and line.startswith(("#", "|", "- "))]
    return "\n".join(out).rstrip() + "\n"


def sectioned(md: str):
    """``(heading, line)`` per line of the page: the ``## `` heading of the section the line is in (the heading
    line's own; None before the first)."""
    heading = None
    for line in md.splitlines():
        if line.startswith("## "):
            heading = line.strip()
        yield heading, line


def section(md: str, heading: str) -> str:
    """One ``## `` section of the page (heading line included), for the README's copy."""
    return "\n".join(line for h, line in sectioned(md) if h == heading).rstrip() + "\n"


def fingerprint_of(md: str) -> str | None:
    """The source fingerprint a page records (None when it has none)."""
    for line in md.splitlines():
        if line.startswith("- source fingerprint: "):
            return line.split(": ", 1)[1].split()[0]
    return None


def picture_of(md: str) -> tuple[str, str] | None:
    """(file name, sha256) of the picture a page records (None when it records none)."""
    for line in md.splitlines():
        if line.startswith(PICTURE_LINE):
            name, _, rest = line[len(PICTURE_LINE):].partition(", sha256 ")
            return name, rest.split()[0]
    return None
