"""``synth_ifeval``: instruction following with verifiable constraints, scored like IFEval.

Each prompt asks for a short list of numbers -- a run from ``a`` to ``b``, one number repeated, given numbers in
reverse order -- and adds a format constraint: a separator, square brackets around each number, or one bullet
(``* ``) per line.  Every constraint has its own checker; as in IFEval, ``prompt_level_strict_acc`` counts a prompt
as followed only when all its constraints hold, and ``inst_level_strict_acc`` is the share of single constraints
that hold.  A checker looks at the response only (no reference answer).

The content is numbers because a number is the same tokens wherever it stands (the tiny BPE, like Qwen2.5's,
splits digits), so following the instruction means copying, counting and reordering -- not learning that a
word after a space is another token than the same word at the start of a line.
"""
from __future__ import annotations

import itertools
import re

SEPARATORS = {"commas": ", ", "dashes": " - ", "spaces": " ", "slashes": " / "}
FORMATS = {**{f"sep:{k}": f"Separate them with {k}." for k in SEPARATORS},
           "brackets": "Put each number in square brackets, separated by spaces.",
           "bullets": "Put each number on its own line, starting with '* '."}


def _render(nums: list[int], fmt: str) -> str:
    if fmt.startswith("sep:"):
        return SEPARATORS[fmt[4:]].join(map(str, nums))
    if fmt == "brackets":
        return " ".join(f"[{n}]" for n in nums)
    return "\n".join(f"* {n}" for n in nums)


def keys() -> list[tuple]:
    out = []
    for a, n, fmt in itertools.product(range(1, 60), range(3, 5), FORMATS):
        out.append(("list", a, a + n - 1, fmt))
    for a, n, fmt in itertools.product(range(1, 100), range(2, 4), FORMATS):
        out.append(("repeat", a, n, fmt))
    for (x, y, z), fmt in itertools.product(itertools.permutations(range(1, 10), 3), FORMATS):
        out.append(("reverse", x, y, z, fmt))
    return out


def item(key: tuple, rng=None) -> dict:
    kind, *args = key
    fmt = args[-1]
    if kind == "list":
        a, b = args[:2]
        nums, task = list(range(a, b + 1)), f"List the numbers from {a} to {b}."
    elif kind == "repeat":
        a, n = args[:2]
        nums, task = [a] * n, f"Write the number {a} {n} times."
    else:
        x, y, z = args[:3]
        nums, task = [z, y, x], f"Write the numbers {x}, {y} and {z} in reverse order."
    prompt = f"{task} {FORMATS[fmt]}"
    response = _render(nums, fmt)
    constraints = [["numbers", nums], ["format", fmt, len(nums)]]
    return {"key": "/".join(map(str, key)), "kind": kind, "prompt": prompt, "response": response,
            "constraints": constraints, "pretrain": f"Instruction: {prompt}\nResponse: {response}"}


# ------------------------------------------------------------------------------------------------ checkers
def check(constraint: list, response: str) -> bool:
    """Whether ``response`` satisfies one constraint (the text is stripped of surrounding whitespace)."""
    text = response.strip()
    kind, *args = constraint
    if kind == "numbers":  # exactly these numbers, in this order (whatever the format)
        (nums,) = args
        return re.findall(r"-?\d+", text) == [str(n) for n in nums]
    if kind == "format":
        fmt, n = args
        if fmt.startswith("sep:"):
            parts = text.split(SEPARATORS[fmt[4:]])
            return len(parts) == n and all(re.fullmatch(r"-?\d+", p) for p in parts)
        if fmt == "brackets":
            return re.fullmatch(r"\[-?\d+\]( \[-?\d+\]){%d}" % (n - 1), text) is not None
        lines = text.split("\n")
        return len(lines) == n and all(re.fullmatch(r"\* -?\d+", ln) for ln in lines)
    raise ValueError(f"unknown constraint {kind!r}")


def score(constraints: list, response: str) -> dict:
    """IFEval-style metrics of one response: prompt level (all hold) and the per-constraint results."""
    ok = [check(c, response) for c in constraints]
    return {"prompt_level_strict_acc": all(ok), "inst_level_strict_acc": ok}
