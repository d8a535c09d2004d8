"""``synth_mc``: four-option multiple choice scored by the log-likelihood of each option (the MMLU / GPQA code
path of lm-eval: ``multiple_choice`` requests answered by the model's ``loglikelihood``, which in block-diffusion
mode scores the option at a ``[MASK]``).

Questions test small "world knowledge" (which word belongs to a category; the categories are facts the
pretraining text states) and a small computation (a sum).  The prompt lists the four options; the continuation
scored is the option itself, as in lm-eval's ARC-style tasks, not its letter as in MMLU: a model of a million
parameters trained for minutes does not learn to point from the right option to its letter (measured: chance
accuracy with MMLU's letters, see docs/embedded_default.md).  Every option is one token of the tiny tokenizer,
so block-diffusion scoring of the first continuation token (the reference implementation's method) sees the whole
option.  The key of an item is its question and its set of options: test and training items never share one.
"""
from __future__ import annotations

import itertools
import random

CATEGORIES = {
    "fruit": ["apple", "pear", "plum", "grape", "lemon", "mango", "peach", "melon", "lime", "fig"],
    "animal": ["cat", "dog", "horse", "mouse", "tiger", "sheep", "goat", "bear", "wolf", "fox"],
    "color": ["red", "blue", "green", "black", "white", "pink", "brown", "gray", "gold", "purple"],
    "tool": ["hammer", "saw", "drill", "wrench", "chisel", "file", "rake", "shovel", "axe", "spade"],
    "city": ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Delhi", "Tokyo", "Seoul", "Quito", "Dublin"],
}
_ARTICLE = {"fruit": "a fruit", "animal": "an animal", "color": "a color", "tool": "a tool", "city": "a city"}


def mc_text(question: str, choices: list[str]) -> str:
    """The prompt: the question, one option per line (so that an option is the same token in the prompt and in
    the answer), and the answer cue."""
    return question + "".join(f"\n{c}" for c in choices) + "\nAnswer:"


def keys() -> list[tuple]:
    """Every problem: ("category", category, word, three distractors) and ("sum", a, b) with a + b < 10.  The
    order of the options (and the distractors of a sum) is a surface form drawn per row."""
    rng = random.Random("synth_mc-keys")
    out = set()
    for cat, words in CATEGORIES.items():
        others = sorted(w for c, ws in CATEGORIES.items() if c != cat for w in ws)
        for w in words:
            for _ in range(40):
                out.add(("category", cat, w, *sorted(rng.sample(others, 3))))
    for a, b in itertools.product(range(0, 10), range(0, 10)):
        if a + b < 10:
            out.add(("sum", a, b))
    return sorted(out, key=str)


def item(key: tuple, rng: random.Random) -> dict:
    kind = key[0]
    if kind == "category":
        cat, correct, distract = key[1], key[2], list(key[3:])
        question = f"Which of these is {_ARTICLE[cat]}?"
    elif kind == "sum":
        a, b = key[1:]
        correct = str(a + b)
        distract = [str(x) for x in rng.sample([x for x in range(10) if x != a + b], 3)]
        question = f"What is {a}+{b}?"
    else:
        raise ValueError(f"unknown multiple-choice problem {key!r}")
    choices = distract + [correct]
    rng.shuffle(choices)
    answer = choices.index(correct)
    text = mc_text(question, choices)
    return {"key": "/".join(map(str, key)), "kind": kind, "question": question, "choices": choices,
            "answer": answer, "prompt": text, "response": correct, "pretrain": f"{text} {correct}"}


def fact_sentences() -> list[str]:
    """The category facts stated in the pretraining text (the "knowledge" the questions test)."""
    return [f"{w[0].upper() + w[1:]} is {_ARTICLE[c]}." for c, ws in CATEGORIES.items() for w in ws]
