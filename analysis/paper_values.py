"""The paper's own numbers (Fast-dLLM v2, arXiv 2509.26328), as data, each with its table/figure id and source.

Only values found in public sources are recorded; anything else is *missing* and is rendered as
``n/a (paper value not available offline)`` -- never guessed.  Sources are ranked: the authors' own pages
(``nvlabs_readme``, ``project_page``) or the issue text quoting the paper (``issue5``) first; third-party
summaries of the paper (``papernotes``, ``summary_31343239756``) only for values the authors' pages do not show.
"""
from __future__ import annotations

from dataclasses import dataclass

MISSING_TEXT = "n/a (paper value not available offline)"

SOURCES = {
    "nvlabs_readme": "NVlabs/Fast-dLLM v2/README.md, 'Benchmark Results' table "
                     "(https://github.com/NVlabs/Fast-dLLM/tree/main/v2)",
    "project_page": "NVlabs/Fast-dLLM v2/index.html, 'Throughput Comparison' text "
                    "(https://nvlabs.github.io/Fast-dLLM/v2)",
    "issue5": "issue #5 (quoted from the paper)",
    "papernotes": "third-party paper note: https://en.papernotes.org/ICLR2026/llm_efficiency/"
                  "fast-dllm_v2_efficient_block-diffusion_llm/ (tables transcribed from the paper)",
    "summary_31343239756": "third-party paper summary of arXiv 2509.26328 (public GitHub markdown, code-search "
                           "file id 31343239756; quotes Tables 1, 2, 4 and Figures 1, 4, 5)",
}

# Table 1 / Table 2 / Table 3 column ids, in the paper's order, with display names.
TABLE1_COLUMNS = {
    "humaneval_base": "HumanEval-Base", "humaneval_plus": "HumanEval-Plus", "mbpp_base": "MBPP-Base",
    "mbpp_plus": "MBPP-Plus", "gsm8k": "GSM8K", "math": "MATH", "ifeval": "IFEval", "mmlu": "MMLU",
    "gpqa": "GPQA", "avg": "Avg.",
}


@dataclass(frozen=True)
class PaperValue:
    table: str  # table / figure id, e.g. "table1", "fig4"
    row: str  # paper row label (model, recipe, setting)
    column: str  # column id
    value: float
    unit: str
    source: str  # key of SOURCES

    @property
    def source_text(self) -> str:
        return SOURCES[self.source]


def _row(table, row, source, unit="%", **cols):
    return [PaperValue(table, row, c, float(v), unit, source) for c, v in cols.items()]


_T1 = ["humaneval_base", "humaneval_plus", "mbpp_base", "mbpp_plus", "gsm8k", "math", "ifeval", "mmlu", "gpqa", "avg"]


def _t1(row, source, values):
    assert len(values) == len(_T1)
    return _row("table1", row, source, **dict(zip(_T1, values)))


VALUES: list[PaperValue] = [
    # ---- Table 1: main results (accuracy, %, threshold 1.0)
    *_t1("Fast-dLLM v2 (1.5B)", "nvlabs_readme", [43.9, 40.2, 50.0, 41.3, 62.0, 38.1, 47.0, 55.1, 27.7, 45.0]),
    *_t1("Fast-dLLM v2 (7B)", "nvlabs_readme", [63.4, 58.5, 63.0, 52.3, 83.7, 61.6, 61.4, 66.6, 31.9, 60.3]),
    *_t1("Qwen2.5-1.5B-Instruct", "papernotes", [42.1, 37.2, 48.1, 41.3, 57.0, 46.8, 41.2, 54.6, 30.6, 44.3]),
    *_t1("Qwen2.5-1.5B-Nemo-FT", "papernotes", [37.2, 33.5, 53.4, 44.4, 58.5, 43.5, 39.4, 58.1, 31.0, 44.3]),
    *_t1("Qwen2.5-7B-Nemo-FT", "papernotes", [52.4, 48.2, 57.1, 50.0, 84.1, 72.0, 69.5, 68.6, 34.2, 59.6]),
    *_t1("Dream (7B)", "papernotes", [57.9, 53.7, 68.3, 56.1, 81.0, 39.2, 62.5, 67.0, 33.0, 57.6]),
    *_row("table1", "Qwen2.5-7B-Instruct", "summary_31343239756",
          humaneval_base=51.2, humaneval_plus=47.6, gsm8k=71.4, avg=58.2),
    # ---- Table 2: training-recipe ablation (1.5B)
    *_row("table2", "naive token shift", "papernotes",
          humaneval_base=38.4, humaneval_plus=32.9, mbpp_base=44.4, gsm8k=59.0, avg=41.3),
    *_row("table2", "+ pad", "papernotes", humaneval_base=38.4, humaneval_plus=34.1, mbpp_base=45.2),
    *_row("table2", "+ pad", "summary_31343239756", avg=42.2),
    *_row("table2", "+ pad + CM", "summary_31343239756", gsm8k=62.0, avg=45.0),
    # ---- Table 3: sub-block size (block 32); the default sub-block 8 is the Table 1 setting
    *_row("table3", "8", "summary_31343239756", gsm8k=62.0),
    # ---- Table 4: inference block size (mismatch with the training block 32)
    *_row("table4", "8", "summary_31343239756", gsm8k=58.5),
    # ---- Figure 1a: throughput vs accuracy (7B, A100, batch 1)
    PaperValue("fig1a", "Fast-dLLM v2 (7B) vs Qwen2.5-7B-Instruct", "speedup", 2.54, "x", "issue5"),
    PaperValue("fig1a", "Fast-dLLM v2 (7B) vs Fast-dLLM-LLaDA", "gsm8k_gain", 5.2, "points", "project_page"),
    # ---- Figure 1b: throughput by batch size (7B, A100)
    PaperValue("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs1", 102.5, "tokens/s", "project_page"),
    PaperValue("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs4", 217.5, "tokens/s", "project_page"),
    # ---- Figure 4: threshold sweep on GSM8K
    PaperValue("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@1.0", 39.1, "tokens/s", "issue5"),
    PaperValue("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@0.9", 101.7, "tokens/s", "issue5"),
    # ---- Figure 5: AR vs diffusion by batch size per GPU ("up to", at batch 64)
    PaperValue("fig_gpu_batch", "A100", "speedup@bs64", 1.5, "x", "issue5"),
    PaperValue("fig_gpu_batch", "H100", "speedup@bs64", 1.8, "x", "issue5"),
]

_INDEX = {(v.table, v.row, v.column): v for v in VALUES}
if len(_INDEX) != len(VALUES):  # pragma: no cover - guards the data above
    raise RuntimeError("duplicate paper value")


def paper_value(table: str, row: str | None, column: str) -> PaperValue | None:
    """The paper's value for (table, row, column), or None when it is not recorded."""
    if row is None:
        return None
    return _INDEX.get((table, row, column))


def rows_of(table: str) -> list[str]:
    seen: list[str] = []
    for v in VALUES:
        if v.table == table and v.row not in seen:
            seen.append(v.row)
    return seen


def values_of(table: str) -> list[PaperValue]:
    return [v for v in VALUES if v.table == table]


def as_records() -> list[dict]:
    """Every recorded value as a flat dict (for ``results/paper_values.csv``)."""
    return [{"table": v.table, "row": v.row, "column": v.column, "value": v.value, "unit": v.unit,
             "source": v.source_text} for v in VALUES]
