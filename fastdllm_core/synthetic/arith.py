"""Arithmetic stand-ins: ``synth_arith`` (GSM8K form) and ``synth_math`` (MATH form, ``\\boxed{}`` answers).

``synth_arith``: two- and three-step word problems.  The answer works the steps out as a running total and ends
with GSM8K's ``#### N`` (``6+3=9, then -8 gives 1, then +4. #### 5``): the first step copies two numbers from the
question, every later step copies one more and applies it to the previous result, so a model needs copying *and*
several dependent steps.

``synth_math``: bracketed expressions of three operations with operator precedence, worked out in the order of
evaluation as a running total and closed with ``The answer is \\boxed{N}.`` like MATH solutions
(``2+4=6, then *3 gives 18, then -5. The answer is \\boxed{13}.``): three dependent steps with products, the
harder task.

**Every computed value is written exactly once** (an intermediate result once, the final one only after
``####`` / in ``\\boxed{}``).  GSM8K's own solutions restate each result as the next step's operand
(``6+3=9. 9-8=1.``); with that form, block-diffusion training teaches a tiny model to *copy* a masked result
from its later restatement, which is visible in training (random masks) but never at decoding time (the later
tokens are still masked): measured on the adapted tiny model, the result token was right 89.5% of the time
with the restatement visible and 24.4% in the left-to-right decoding context, while the AR model computes it
(``docs/embedded_default.md``, "The future-copy shortcut").  Stating each value once leaves computing as the
only way to the result, as it is for an AR model.

Numbers stay small (every value of a word problem is a single digit, every value of an expression at most 30)
so that a tiny model trained for minutes learns the arithmetic facts; the difficulty lies in the copying and the
chain of dependent steps.

An item's *key* is its numeric problem (template and numbers); names and objects are surface forms drawn per
row.  Test and training items never share a key.
"""
from __future__ import annotations

import itertools
import random

ARITH_PROMPT = "Question: {question}\nAnswer:"
MATH_PROMPT = "Problem: {problem}\nSolution:"

NAMES = [("Tom", "he"), ("Ann", "she"), ("Sam", "he"), ("Mia", "she"), ("Bob", "he"), ("Eve", "she"),
         ("Max", "he"), ("Zoe", "she")]
OBJECTS = ["apples", "pens", "cards", "books", "eggs", "coins", "shells", "stamps"]

# (kind, question, steps): a step "+b" applies + with operand b to the running value (starting at a)
_WORD = [
    ("add_sub", "{N} has {a} {I}. {P} gets {b} more, then gives away {c}. How many {I} does {N} have now?",
     "+b -c"),
    ("sub_add", "{N} has {a} {I}. {P} loses {b}, then finds {c}. How many {I} does {N} have now?", "-b +c"),
    ("add_add", "{N} has {a} {I}. {P} buys {b}, then gets {c} as a gift. How many {I} does {N} have now?",
     "+b +c"),
    ("sub_sub", "{N} has {a} {I}. {P} gives {b} to a friend and {c} to another. How many {I} are left?",
     "-b -c"),
    ("mul_add", "{N} has {a} boxes with {b} {I} each and {c} loose {I}. How many {I} in all?", "*b +c"),
    ("mul_sub", "{N} buys {a} bags of {b} {I} and gives away {c}. How many {I} are left?", "*b -c"),
    ("add_sub_add", "{N} has {a} {I}, gets {b}, gives away {c}, then finds {d}. How many {I} now?", "+b -c +d"),
]

_OPS = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}


ARITH_MAX = 9  # largest value of a word problem


def running_total(first, steps: list[tuple[str, object]], values: list) -> str:
    """``a+b=r1, then -c gives r2, then +d.``: the steps as a running total, every intermediate value written
    once and the last one not at all (it is the final answer, written after ``####`` / in ``\\boxed{}``)."""
    (op, y), rest = steps[0], steps[1:]
    parts = [f"{first}{op}{y}={values[0]}" if rest else f"{first}{op}{y}"]
    for k, (op, y) in enumerate(rest):
        parts.append(f"then {op}{y} gives {values[k + 1]}" if k + 1 < len(rest) else f"then {op}{y}")
    return ", ".join(parts) + "."


def _steps(first: int, steps: list[tuple[str, int]]):
    """(worked steps, result) from ``first``; None if a value leaves [0, ARITH_MAX]."""
    cur, values = first, []
    for op, y in steps:
        cur = _OPS[op](cur, y)
        if not 0 <= cur <= ARITH_MAX:
            return None
        values.append(cur)
    return running_total(first, steps, values), cur


def _word_keys() -> list[tuple]:
    keys = []
    for kind, _, spec in _WORD:
        ops = spec.split()
        mul = ops[0][0] == "*"
        a_range = range(2, 5) if mul else range(1, 10)
        b_range = range(2, 5) if mul else range(1, 10)
        rest = [range(1, 10)] * (len(ops) - 1)
        for nums in itertools.product(a_range, b_range, *rest):
            if _steps(nums[0], [(o[0], n) for o, n in zip(ops, nums[1:])]) is not None:
                keys.append((kind, *nums))
    return keys


def arith_item(key: tuple, rng: random.Random) -> dict:
    kind, *nums = key
    _, question, spec = next(t for t in _WORD if t[0] == kind)
    ops = spec.split()
    working, result = _steps(nums[0], [(o[0], n) for o, n in zip(ops, nums[1:])])
    name, pron = rng.choice(NAMES)
    fmt = dict(zip("abcd", nums), N=name, P=pron.capitalize(), I=rng.choice(OBJECTS))
    q = question.format(**fmt)
    return {"key": "/".join(map(str, key)), "kind": kind, "steps": len(ops), "question": q,
            "answer": f"{working} #### {result}", "prompt": ARITH_PROMPT.format(question=q),
            "response": f"{working} #### {result}", "pretrain": f"Question: {q}\nAnswer: {working} #### {result}"}


# ------------------------------------------------------------------------------------------------ MATH form
# (kind, expression, evaluation order): the solution evaluates the sub-expressions in order
_EXPR = [
    ("a(b+c)-d", "{a}*({b}+{c})-{d}", [("b", "+", "c"), ("a", "*", 0), (1, "-", "d")]),
    ("(a+b)c+d", "({a}+{b})*{c}+{d}", [("a", "+", "b"), (0, "*", "c"), (1, "+", "d")]),
    ("a+bc-d", "{a}+{b}*{c}-{d}", [("b", "*", "c"), ("a", "+", 0), (1, "-", "d")]),
    ("ab-c+d", "{a}*{b}-{c}+{d}", [("a", "*", "b"), (0, "-", "c"), (1, "+", "d")]),
    ("(a-b)c+d", "({a}-{b})*{c}+{d}", [("a", "-", "b"), (0, "*", "c"), (1, "+", "d")]),
]


MATH_MAX = 30  # largest value of an expression


def _expr_solution(order, nums: dict):
    """(worked steps as a running total, the value of every step), or None for a negative value or a product with
    a factor < 2.  Every step after the first applies an operation to the previous result (the templates only
    put a previous result on the right of a commutative operation), written as ``op y``."""
    vals, steps = [], []
    for i, (x, op, y) in enumerate(order):
        xv = vals[x] if isinstance(x, int) else nums[x]
        yv = vals[y] if isinstance(y, int) else nums[y]
        z = _OPS[op](xv, yv)
        if z < 0 or (op == "*" and not (2 <= min(xv, yv) and max(xv, yv) <= 9 and min(xv, yv) <= 5)):
            return None
        if i and not (isinstance(x, int) and x == i - 1 or isinstance(y, int) and y == i - 1 and op in "+*"):
            raise ValueError(f"template step {i} does not apply to the previous result: {(x, op, y)}")
        vals.append(z)
        steps.append((op, yv if isinstance(x, int) else xv) if i else (op, yv))
    first = nums[order[0][0]]
    return running_total(first, steps, vals), vals


def _math_keys() -> list[tuple]:
    keys = []
    for kind, _, order in _EXPR:
        for a, b, c, d in itertools.product(range(1, 10), repeat=4):
            sol = _expr_solution(order, dict(a=a, b=b, c=c, d=d))
            if sol is not None and max(sol[1]) <= MATH_MAX:
                keys.append((kind, a, b, c, d))
    return keys


def math_item(key: tuple, rng: random.Random) -> dict:
    kind, a, b, c, d = key
    _, expr, order = next(t for t in _EXPR if t[0] == kind)
    working, vals = _expr_solution(order, dict(a=a, b=b, c=c, d=d))
    result = vals[-1]
    problem = f"Compute {expr.format(a=a, b=b, c=c, d=d)}."
    solution = f"{working} The answer is \\boxed{{{result}}}."
    return {"key": "/".join(map(str, key)), "kind": kind, "problem": problem, "solution": solution,
            "answer": str(result), "prompt": MATH_PROMPT.format(problem=problem), "response": solution,
            "pretrain": f"Problem: {problem}\nSolution: {solution}"}


def arith_keys() -> list[tuple]:
    return _word_keys()


def math_keys() -> list[tuple]:
    return _math_keys()
