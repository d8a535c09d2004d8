"""The x axes a study is plotted and fitted against: which summary column, what its series run along, how its
values are named on the page and drawn on a log axis, and where the paper's models sit on it.

* ``adapt``: adaptation tokens per parameter, along the budgets of one base (the budget study);
* ``params``: parameters, along bases of different sizes (the scale study);
* ``pretrain``: the base's pretraining tokens per parameter, along bases of one size pretrained for longer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from analysis.study_paper import PAPER_PRETRAIN_RATIOS, PAPER_RATIOS, PAPER_SIZES


@dataclass(frozen=True)
class Axis:
    """One x axis of a study."""
    name: str
    column: str  # the summary column plotted and fitted against (log10)
    label: str  # the axis label, also the unit of a value on it ("between 1e6 and 1e7 parameters")
    along: str  # the key a series runs along ("base" or "budget"); the series are the other keys
    noun: str  # one point along the axis in words ("narrows with size", "at some size")
    plural: str  # the points of a fit, as the fit table heads them ("sizes")
    at_zero: str  # what the fit's zero crossing is ("the parameter count where the line reaches zero")
    to_base: str  # what a gap to the base is against, as the fit table says
    to_ntp: str  # what a gap to NTP is against
    ticks: tuple = (1.0,)  # labelled ticks within a decade
    powers: bool = False  # tick labels as powers of ten (1e6) rather than plain numbers
    margin: float = 2.0  # the x limits beyond the points drawn, as a factor
    marks: dict = field(default_factory=dict)  # the paper's sizes on this axis: {size: x}
    mark_label: str = "paper {size}"  # a mark's label in the figure
    marks_note: str = ""  # the page's sentence on the marks; {marks}: "name value, ..."
    mark_format: str = ".2f"

    @property
    def series(self) -> list[str]:
        """The keys that tell one series from another: every summary key but the one the axis runs along."""
        return [k for k in ("base", "model", "lever", "lever_value", "budget") if k != self.along]

    def marks_text(self) -> str:
        """The page's sentence giving the paper's values on this axis."""
        marks = ", ".join(f"{self.mark_label.format(size=k)} {v:{self.mark_format}}" for k, v in self.marks.items())
        return self.marks_note.format(marks=marks)


AXES = {
    "adapt": Axis("adapt", "tokens_per_param", "adaptation tokens per parameter", "budget", "budget", "budgets",
                  "the number of adaptation tokens per parameter", "its AR base", "NTP at the same base and tokens",
                  ticks=(1.0, 2.0, 5.0), margin=1.6, marks=PAPER_RATIOS,
                  marks_note="Tokens per parameter of the paper (its tokens over Qwen2.5's parameter counts): "
                             "{marks}."),
    "params": Axis("params", "size_params", "parameters", "base", "size", "sizes", "the parameter count",
                   "its size's AR base", "NTP at the same size and tokens", powers=True,
                   marks={k: v.params for k, v in PAPER_SIZES.items()}, mark_format=".3g",
                   marks_note="Parameters of the paper's models (Qwen2.5's model cards, not the paper): {marks}."),
    "pretrain": Axis("pretrain", "pretrain_tokens_per_param", "pretraining tokens per parameter", "base",
                     "pretraining budget", "bases", "the number of pretraining tokens per parameter",
                     "its AR base", "NTP from the same base with the same tokens", marks=PAPER_PRETRAIN_RATIOS,
                     mark_label="Qwen2.5 {size}", mark_format=",.0f",
                     marks_note="Pretraining tokens per parameter of the paper's bases (Qwen2.5's report: about 18T "
                                "tokens, over its parameter counts; not from the paper): {marks}."),
}


def axis(x: str | Axis) -> Axis:
    """The axis ``x`` names (a key of :data:`AXES`), or ``x`` itself."""
    if isinstance(x, Axis):
        return x
    if x not in AXES:
        raise ValueError(f"unknown x axis {x!r}; known: {', '.join(AXES)}")
    return AXES[x]
