"""Code stand-ins in EvalPlus form: ``synth_code`` (HumanEval: signature + docstring) and ``synth_mbpp`` (MBPP:
a task sentence + one example ``assert``).

Every item has ``task_id, prompt, canonical_solution, entry_point, base_input, plus_input, atol`` and a
HumanEval-style ``test``, so EvalPlus scores base *and* plus tests through ``HUMANEVAL_OVERRIDE_PATH`` /
``MBPP_OVERRIDE_PATH``.  A solution has to copy the function name and constants from the prompt; several
templates need two dependent statements.  The key of an item is its function (template and constants): test
and training items never share one.
"""
from __future__ import annotations

import json
import random
import string

# ------------------------------------------------------------------------------------------------ HumanEval form
# (name, arg, docstring, body, input kind, constant ranges); {k}, {m} integers, {c}, {d} letters
_HE = [
    ("add_{k}", "x", "Return x plus {k}.", "return x + {k}", "int", {"k": range(1, 40)}),
    ("sub_{k}", "x", "Return x minus {k}.", "return x - {k}", "int", {"k": range(1, 40)}),
    ("mul_{k}", "x", "Return x times {k}.", "return x * {k}", "int", {"k": range(2, 40)}),
    ("mod_{k}", "x", "Return x modulo {k}.", "return x % {k}", "int", {"k": range(2, 40)}),
    ("gt_{k}", "x", "Return True if x is greater than {k}.", "return x > {k}", "int", {"k": range(1, 40)}),
    ("cap_{k}", "x", "Return x, but at most {k}.", "return min(x, {k})", "int", {"k": range(1, 40)}),
    ("addmul_{k}_{m}", "x", "Return x plus {k}, times {m}.", "y = x + {k}\n    return y * {m}", "int",
     {"k": range(1, 10), "m": range(2, 10)}),
    ("muladd_{k}_{m}", "x", "Return x times {k}, plus {m}.", "y = x * {k}\n    return y + {m}", "int",
     {"k": range(2, 10), "m": range(1, 10)}),
    ("incall_{k}", "xs", "Add {k} to each item of xs.", "return [v + {k} for v in xs]", "list",
     {"k": range(1, 30)}),
    ("scale_{k}", "xs", "Multiply each item of xs by {k}.", "return [v * {k} for v in xs]", "list",
     {"k": range(2, 30)}),
    ("count_gt_{k}", "xs", "Count the items of xs greater than {k}.", "return len([v for v in xs if v > {k}])",
     "list", {"k": range(1, 30)}),
    ("keep_lt_{k}", "xs", "Keep the items of xs less than {k}.", "return [v for v in xs if v < {k}]", "list",
     {"k": range(1, 30)}),
    ("sum_gt_{k}", "xs", "Return the sum of the items of xs greater than {k}.",
     "ys = [v for v in xs if v > {k}]\n    return sum(ys)", "list", {"k": range(1, 30)}),
    ("first_{k}", "xs", "Return the first {k} items of xs.", "return xs[:{k}]", "list", {"k": range(1, 10)}),
    ("rep_{k}", "s", "Return s repeated {k} times.", "return s * {k}", "str", {"k": range(2, 10)}),
    ("last_{k}", "s", "Return the last {k} characters of s.", "return s[-{k}:]", "str", {"k": range(1, 10)}),
    ("count_{c}", "s", "Count the letter '{c}' in s.", "return s.count('{c}')", "str",
     {"c": string.ascii_lowercase}),
    ("swap_{c}_{d}", "s", "Replace each '{c}' in s by '{d}'.", "return s.replace('{c}', '{d}')", "str",
     {"c": string.ascii_lowercase[:23], "d": "xyz"}),
]

# ------------------------------------------------------------------------------------------------ MBPP form
# (entry point, arg, task sentence, body, input kind, constant ranges)
_MBPP = [
    ("square_plus", "x", "return the square of x plus {k}", "return x * x + {k}", "int", {"k": range(1, 60)}),
    ("div_down", "x", "return x divided by {k}, rounded down", "return x // {k}", "int", {"k": range(2, 60)}),
    ("double_minus", "x", "return twice x minus {k}", "return 2 * x - {k}", "int", {"k": range(1, 60)}),
    ("is_multiple", "x", "check whether x is a multiple of {k}", "return x % {k} == 0", "int", {"k": range(2, 60)}),
    ("sum_plus", "xs", "return the sum of the list xs plus {k}", "return sum(xs) + {k}", "list",
     {"k": range(1, 60)}),
    ("count_value", "xs", "count how many times {k} appears in the list xs", "return xs.count({k})", "list",
     {"k": range(0, 60)}),
    ("drop_below", "xs", "remove the items of the list xs that are below {k}", "return [v for v in xs if v >= {k}]",
     "list", {"k": range(1, 60)}),
    ("max_plus", "xs", "return the largest item of the list xs plus {k}, or {k} for an empty list",
     "if not xs:\n        return {k}\n    return max(xs) + {k}", "list", {"k": range(1, 60)}),
    ("wrap_char", "s", "return the string s with '{c}' added at both ends", "return '{c}' + s + '{c}'", "str",
     {"c": string.ascii_lowercase}),
    ("longer_than", "s", "check whether the string s is longer than {k} characters", "return len(s) > {k}", "str",
     {"k": range(0, 30)}),
    ("head_rep", "s", "return the first character of s repeated {k} times", "return s[:1] * {k}", "str",
     {"k": range(2, 30)}),
]


def _inputs(kind: str, rng: random.Random, n: int, wide: bool) -> list[list]:
    hi = 1000 if wide else 20
    out = []
    for _ in range(n):
        if kind == "int":
            out.append([rng.randint(-hi, hi)])
        elif kind == "list":
            out.append([[rng.randint(-hi if wide else 0, hi) for _ in range(rng.randint(0, 12 if wide else 5))]])
        else:
            alphabet = "abcdefghijklmnopqrstuvwxyz"
            out.append(["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 15 if wide else 6)))])
    return out


def _run_canonical(code: str, entry_point: str, inputs: list[list]) -> list:
    """Outputs of the project's own (trusted) canonical solution."""
    ns: dict = {}
    exec(compile(code, f"<synth {entry_point}>", "exec"), ns)  # noqa: S102 - generated by this module
    fn = ns[entry_point]
    return [fn(*[json.loads(json.dumps(a)) for a in args]) for args in inputs]


def _consts(ranges: dict):
    keys = list(ranges)
    if len(keys) == 1:
        return [{keys[0]: v} for v in ranges[keys[0]]]
    return [{keys[0]: a, keys[1]: b} for a in ranges[keys[0]] for b in ranges[keys[1]] if a != b]


def _check_fn(base: list, outs: list) -> str:
    return "def check(candidate):\n" + "".join(
        f"    assert candidate({', '.join(repr(a) for a in args)}) == {out!r}\n" for args, out in zip(base, outs))


def humaneval_keys() -> list[tuple]:
    return [(i, tuple(sorted(c.items()))) for i, t in enumerate(_HE) for c in _consts(t[5])]


def mbpp_keys() -> list[tuple]:
    return [(i, tuple(sorted(c.items()))) for i, t in enumerate(_MBPP) for c in _consts(t[5])]


def humaneval_item(key: tuple, rng: random.Random) -> dict:
    idx, consts = key
    name_p, arg, doc_p, body_p, kind, _ = _HE[idx]
    fmt = dict(consts)
    name = name_p.format(**fmt)
    prompt = f'def {name}({arg}):\n    """{doc_p.format(**fmt)}"""\n'
    body = f"    {body_p.format(**fmt)}\n"
    irng = random.Random(f"code-{name}")
    base, plus = _inputs(kind, irng, 3, False), _inputs(kind, irng, 10, True)
    outs = _run_canonical(prompt + body, name, base)
    solution = f"def {name}({arg}):\n{body}".rstrip("\n")
    return {"key": name, "kind": name_p, "prompt": prompt, "canonical_solution": body, "entry_point": name,
            "test": _check_fn(base, outs), "base_input": base, "plus_input": plus, "atol": 0, "contract": "",
            "response": solution, "pretrain": prompt + body}


def mbpp_item(key: tuple, rng: random.Random) -> dict:
    idx, consts = key
    name, arg, task_p, body_p, kind, _ = _MBPP[idx]
    fmt = dict(consts)
    body = f"    {body_p.format(**fmt)}\n"
    code = f"def {name}({arg}):\n{body}"
    irng = random.Random(f"mbpp-{name}-{sorted(fmt.items())}")
    base, plus = _inputs(kind, irng, 3, False), _inputs(kind, irng, 10, True)
    example = base[0]
    out = _run_canonical(code, name, [example])[0]
    sentence = f"Write a function to {task_p.format(**fmt)}."
    prompt = f'"""\n{sentence}\nassert {name}({", ".join(repr(a) for a in example)}) == {out!r}\n"""\n'
    outs = _run_canonical(code, name, base)
    return {"key": f"{name}/{sorted(fmt.items())}", "kind": name, "prompt": prompt, "canonical_solution": code,
            "entry_point": name, "test": _check_fn(base, outs), "base_input": base, "plus_input": plus, "atol": 0,
            "contract": "", "response": code.rstrip("\n"), "pretrain": prompt + code}
