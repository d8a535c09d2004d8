"""The paper's values a study is set against: its models' sizes and Table 1 rows, their gaps (model minus base,
and Fast-dLLM v2 minus the NTP model fine-tuned on the same data), and where its models sit on each x axis of a
study (parameters, adaptation tokens per parameter, pretraining tokens per parameter).

Parameter counts and pretraining tokens are Qwen2.5's (its model cards and its technical report), not the paper's:
the paper adapts Qwen2.5 and prints neither.
"""
from __future__ import annotations

from typing import NamedTuple

from analysis.paper_values import paper_value

GAP_COLUMNS = ("avg", "gsm8k", "humaneval_base")


class PaperSize(NamedTuple):
    """One of the paper's sizes: its parameter count and its rows in Table 1."""
    params: float
    base: str
    recipe: str
    ntp: str


# Qwen2.5's parameter counts (its model cards, not the paper) and the paper's Table 1 rows of each size
PAPER_SIZES = {"1.5B": PaperSize(1.54e9, "Qwen2.5-1.5B-Instruct", "Fast-dLLM v2 (1.5B)", "Qwen2.5-1.5B-Nemo-FT"),
               "7B": PaperSize(7.61e9, "Qwen2.5-7B-Instruct", "Fast-dLLM v2 (7B)", "Qwen2.5-7B-Nemo-FT")}
# the paper's rows behind each kind of paper_gaps, as the figure names them
PAPER_SERIES = {"recipe": "Fast-dLLM v2", "ntp": "Qwen2.5-Nemo-FT (NTP)",
                "recipe_vs_ntp": "Fast-dLLM v2 minus Qwen2.5-Nemo-FT"}
# the paper's adaptation tokens (appendix: 6,000 x 524,288 and 2,500 x 524,288) over Qwen2.5's parameter counts
# (1.54B and 7.61B, Qwen2.5's model cards, not the paper): the paper's tokens per parameter, by size
PAPER_RATIOS = {"1.5B": 3.15e9 / 1.54e9, "7B": 1.31e9 / 7.61e9}
# Qwen2.5's pretraining tokens (its technical report: "up to 18 trillion tokens"; the paper does not say)
QWEN25_PRETRAIN_TOKENS = 18e12
# the bases' pretraining tokens per parameter, from Qwen2.5's report and model cards (not the paper)
PAPER_PRETRAIN_RATIOS = {name: QWEN25_PRETRAIN_TOKENS / row.params for name, row in PAPER_SIZES.items()}


def paper_gaps(kind: str) -> list[dict]:
    """The paper's own gaps (Table 1; real benchmarks), ``[{size, params, column, gap}]``: ``recipe`` or ``ntp``
    minus its Qwen2.5-Instruct base, or ``recipe_vs_ntp``: Fast-dLLM v2 minus the NTP model fine-tuned on the same
    data (Nemo-FT)."""
    model, ref = {"recipe": ("recipe", "base"), "ntp": ("ntp", "base"), "recipe_vs_ntp": ("recipe", "ntp")}[kind]
    out = []
    for name, row in PAPER_SIZES.items():
        for col in GAP_COLUMNS:
            a = paper_value("table1", getattr(row, model), col)
            b = paper_value("table1", getattr(row, ref), col)
            if a is not None and b is not None:  # paper_value: None where the paper gives no value
                out.append(dict(size=name, params=row.params, column=col, gap=a.value - b.value))
    return out
