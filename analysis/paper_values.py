"""The paper's own numbers (Fast-dLLM v2, arXiv 2509.26328), as data, each with its table/figure id and source.

Tables 1-4 are transcribed in full from the paper: every printed cell of every row and column (173 numeric
accuracy cells, plus the 7 cells of Table 1 that the paper prints as "-").  A "-" is a value the paper does *not*
give; it is recorded explicitly in :data:`NOT_GIVEN` and rendered as :data:`NOT_GIVEN_TEXT`, distinct from a value
this file simply does not hold (:data:`MISSING_TEXT`).  Each Table 1 row also carries the paper's printed label and
its "#Params" (:class:`PaperRow`); row ids are this project's (the configs' ``paper_row``), the printed label is
the paper's.  Every printed Avg. is the mean of its row's nine cells to rounding, except SmolLM 2's (40.7
printed, 40.18 from its cells), which is kept as printed.

Figure values are the numbers the paper's text and captions quote (Figures 1(a), 4, 5; the abstract's headline
speed-up); Figure 5/6 statements without a number are kept as paraphrased :data:`FINDINGS`.  Only where the paper's
text gives no number is a value taken from the authors' own project page, and it says so (Figure 1(b)'s 102.5 and
217.5 tokens/s).  Nothing here reads the paper at run time: the numbers are transcribed by hand and checked by
``tests/test_paper_values.py`` against a second, independent transcription.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

MISSING_TEXT = "the paper's table has no such row or column (no paper value to show)"
NOT_GIVEN_TEXT = "- (not given in the paper)"

PAPER = "the paper (arXiv 2509.26328)"
SOURCES = {
    "paper": PAPER,
    "project_page": "the authors' project page (https://nvlabs.github.io/Fast-dLLM/v2, NVlabs/Fast-dLLM "
                    "v2/index.html), 'Throughput Comparison' text",
}
# Values not taken from the paper, and why: (table, row, column) -> reason.  Everything else is the paper's.
NON_PAPER_EXCEPTIONS = {
    ("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs1"): "the paper's text gives no number for Figure 1(b)",
    ("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs4"): "the paper's text gives no number for Figure 1(b)",
}

# Table 1 / Table 2 column ids, in the paper's order, with display names.
TABLE1_COLUMNS = {
    "humaneval_base": "HumanEval-Base", "humaneval_plus": "HumanEval-Plus", "mbpp_base": "MBPP-Base",
    "mbpp_plus": "MBPP-Plus", "gsm8k": "GSM8K", "math": "MATH", "ifeval": "IFEval", "mmlu": "MMLU",
    "gpqa": "GPQA", "avg": "Avg.",
}
# Tables 3 and 4 print benchmarks as rows and sizes as columns; here the size is the row id and the benchmark the
# column id.  The paper's "HumanEval" / "HumanEval+" are the EvalPlus base / plus settings of Table 1 (the
# sub-block-8 cells of Table 3 equal the Fast-dLLM v2 (1.5B) cells of Table 1).
TABLE34_COLUMNS = {"gsm8k": "GSM8K", "humaneval_base": "HumanEval", "humaneval_plus": "HumanEval+"}
PAPER_TABLES = ("table1", "table2", "table3", "table4")


@dataclass(frozen=True)
class PaperValue:
    table: str  # table / figure id, e.g. "table1", "fig_threshold"
    row: str  # row id (model, recipe, setting); the paper's printed label is in ROWS
    column: str  # column id
    value: float | None  # None only for a cell the paper prints as "-" (see NOT_GIVEN)
    unit: str
    source: str  # key of SOURCES
    where: str = ""  # where in the source, e.g. "Table 1"
    note: str = ""

    @property
    def source_text(self) -> str:
        return f"{SOURCES[self.source]}, {self.where}" if self.where else SOURCES[self.source]

    @property
    def given(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class PaperRow:
    table: str
    row: str  # id used by the configs (paper_row)
    label: str  # as printed in the paper
    params: str | None = None  # Table 1 "#Params", as printed
    group: str = ""  # Table 1 group ("1B Models" / "7B+ Models")

    @property
    def display(self) -> str:
        if self.params and self.params not in self.label:
            return f"{self.label} ({self.params})"
        return self.label


DASH = "-"  # a cell the paper prints as "-"
_T1 = list(TABLE1_COLUMNS)

# ---- Tables 1-4, as printed: analysis/paper_tables.csv, one line per row (Table 1: row id, printed label, #Params,
# group, then HumanEval Base, Plus, MBPP Base, Plus, GSM8K, Math, IFEval, MMLU, GPQA, Avg.; Table 2: the same
# columns; Tables 3 and 4: one line per sub-block / block size 2, 4, 8, 16, 32 (block 32 in training), with
# GSM8K, HumanEval, HumanEval+).  Table 1: sub-block 8, block 32, threshold 1.0.  "-" is a cell printed as "-".
TABLES_FILE = Path(__file__).with_name("paper_tables.csv")
_WHERE = {"table1": "Table 1", "table2": "Table 2", "table3": "Table 3", "table4": "Table 4"}

# Old row ids still accepted by paper_value() / paper_cell().
ROW_ALIASES = {("table1", "Dream (7B)"): "Dream"}


def _build_tables() -> tuple[list[PaperRow], list[PaperValue]]:
    with open(TABLES_FILE, newline="") as fh:
        lines = list(csv.DictReader(fh))
    rows = [PaperRow(r["table"], r["row"], r["label"], r["params"] or None, r["group"]) for r in lines]
    cells = [PaperValue(r["table"], r["row"], col, None if r[col] == DASH else float(r[col]), "%", "paper",
                        _WHERE[r["table"]], "printed as '-': not given in the paper" if r[col] == DASH else "")
             for r in lines for col in (_T1 if r["table"] in ("table1", "table2") else TABLE34_COLUMNS)]
    return rows, cells


ROWS, _CELLS = _build_tables()

# ---- Figures and text: the numbers the paper quotes.
_FIGURES = [
    PaperValue("abstract", "Fast-dLLM v2 vs standard AR decoding", "speedup_up_to", 2.5, "x", "paper",
               "abstract (also Sections 1 and 5)"),
    # Figure 1(a): throughput vs GSM8K accuracy (A100).
    PaperValue("fig1a", "Fast-dLLM v2 (7B) vs Qwen2.5-7B-Instruct", "speedup", 2.54, "x", "paper",
               "Figure 1(a) caption", "throughput ratio at comparable accuracy, A100"),
    PaperValue("fig1a", "Fast-dLLM v2 (7B) vs Fast-dLLM-LLaDA", "gsm8k_gain", 5.2, "points", "paper",
               "Figure 1(a) caption", "GSM8K accuracy gain, printed as '+5.2%'"),
    # Figure 1(b): throughput by batch size; the paper's text has no number, the project page has.
    PaperValue("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs1", 102.5, "tokens/s", "project_page",
               note="panel (b) of the paper's Figure 1, A100; " + NON_PAPER_EXCEPTIONS[
                   ("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs1")]),
    PaperValue("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs4", 217.5, "tokens/s", "project_page",
               note="panel (b) of the paper's Figure 1, A100; " + NON_PAPER_EXCEPTIONS[
                   ("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs4")]),
    # Figure 4: confidence-threshold sweep on GSM8K.  The paper does not name the model size for Figure 4; the
    # row id "Fast-dLLM v2 (7B)" is kept only because callers use it.
    PaperValue("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@1.0", 39.1, "tokens/s", "paper",
               "Section 4.1 text on Figure 4", "model size not stated for Figure 4"),
    PaperValue("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@0.9", 101.7, "tokens/s", "paper",
               "Section 4.1 text on Figure 4", "model size not stated for Figure 4"),
    PaperValue("fig_threshold", "Fast-dLLM v2 (7B)", "speedup@0.9", 2.6, "x", "paper",
               "Figure 4 caption and Section 4.1 text", "vs threshold 1.0; 'minimal' / 'marginal' GSM8K drop"),
    # Figure 5: Fast-dLLM v2 (7B) vs Qwen2.5-7B-Instruct by batch size, GSM8K, threshold 0.9, sub-block cache on.
    PaperValue("fig_gpu_batch", "A100", "speedup@bs64", 1.5, "x", "paper", "Section 4.1 text on Figure 5",
               "'up to', at batch size 64"),
    PaperValue("fig_gpu_batch", "H100", "speedup_up_to", 1.8, "x", "paper", "Section 4.1 text on Figure 5",
               "'up to'; the text names no batch size for the H100 maximum"),
]


@dataclass(frozen=True)
class PaperFinding:
    figure: str  # figure id, as in VALUES
    statement: str  # paraphrase of what the paper says (no number beyond those quoted)
    where: str

    @property
    def source_text(self) -> str:
        return f"{PAPER}, {self.where}"


FINDINGS: list[PaperFinding] = [
    PaperFinding("fig_gpu_batch", "Block diffusion (Fast-dLLM v2 7B) has a higher throughput than AR decoding "
                 "(Qwen2.5-7B-Instruct) at every batch size shown, on both A100 and H100 (GSM8K, threshold 0.9, "
                 "sub-block cache on).", "Figure 5 caption and Section 4.1 text"),
    PaperFinding("fig_gpu_batch", "The advantage grows with batch size: up to 1.5x on A100 at batch size 64, and "
                 "larger on H100 (up to 1.8x).", "Section 4.1 text on Figure 5"),
    PaperFinding("fig_subblock", "Accuracy is largely unaffected by the sub-block cache across block and batch "
                 "sizes; a larger sub-block size costs a little accuracy.", "Figure 6(a) caption and Section 4.2"),
    PaperFinding("fig_subblock", "Throughput rises with the sub-block size; the sub-block cache has a negligible "
                 "effect at small batch sizes and a substantial one when compute-bound, e.g. batch size 32.",
                 "Figure 6(b) caption and Section 4.2"),
]

VALUES: list[PaperValue] = [v for v in _CELLS if v.given] + _FIGURES
NOT_GIVEN: list[PaperValue] = [v for v in _CELLS if not v.given]

_INDEX = {(v.table, v.row, v.column): v for v in VALUES + NOT_GIVEN}
if len(_INDEX) != len(VALUES) + len(NOT_GIVEN):  # pragma: no cover - guards the data above
    raise RuntimeError("duplicate paper value")
_ROWS = {(r.table, r.row): r for r in ROWS}


def _key(table: str, row: str) -> str:
    return ROW_ALIASES.get((table, row), row)


def paper_cell(table: str, row: str | None, column: str) -> PaperValue | None:
    """The recorded cell, given or not given ("-") by the paper; None when this file holds nothing for it."""
    if row is None:
        return None
    return _INDEX.get((table, _key(table, row), column))


def paper_value(table: str, row: str | None, column: str) -> PaperValue | None:
    """The paper's value for (table, row, column), or None when the paper does not give it or it is not recorded
    (tell the two apart with :func:`is_not_given`)."""
    v = paper_cell(table, row, column)
    return v if v is not None and v.given else None


def is_not_given(table: str, row: str | None, column: str) -> bool:
    """True for a cell the paper prints as "-"."""
    v = paper_cell(table, row, column)
    return v is not None and not v.given


def absent_text(table: str, row: str | None, column: str) -> str:
    """How to show a cell with no paper value: :data:`NOT_GIVEN_TEXT` or :data:`MISSING_TEXT`."""
    return NOT_GIVEN_TEXT if is_not_given(table, row, column) else MISSING_TEXT


def row_info(table: str, row: str | None) -> PaperRow | None:
    return None if row is None else _ROWS.get((table, _key(table, row)))


def label_of(table: str, row: str) -> str:
    """The paper's printed label of a row (with #Params where the label lacks it); the id if none is recorded."""
    r = row_info(table, row)
    return r.display if r else row


def rows_of(table: str) -> list[str]:
    return list(dict.fromkeys([r.row for r in ROWS if r.table == table] + [v.row for v in VALUES if v.table == table]))


def values_of(table: str) -> list[PaperValue]:
    """The values the paper gives for a table/figure (no "-" cells)."""
    return [v for v in VALUES if v.table == table]


def as_records() -> list[dict]:
    """Every recorded cell as a flat dict (for ``results/paper_values.csv``); "-" cells have an empty value."""
    out = []
    for v in VALUES + NOT_GIVEN:
        r = row_info(v.table, v.row)
        out.append({"table": v.table, "row": v.row, "paper_label": r.label if r else "",
                    "params": (r.params or "") if r else "", "column": v.column,
                    "value": v.value if v.given else "", "given": v.given, "unit": v.unit,
                    "source": v.source_text, "note": v.note})
    return out
