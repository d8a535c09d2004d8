"""The paper's case studies (Fast-dLLM v2, arXiv 2509.26328, Tables 5 and 6: dialogues of Fast-dLLM v2 7B), as data.

Each case is the paper's conversation: its user turns verbatim, and the paper's assistant answer after each.  The
text is transcribed from the paper's LaTeX source with only its table layout removed: row ends (``\\\\``) and the
"User"/"Assistant" cell markup are dropped, ``\\texttt{x}`` and ``\\textbf{x}`` are reduced to ``x``, and the
``lstlisting`` code block is written as a fenced Markdown block.  Mathematics stays as the paper prints it
(``\\( ... \\)``, ``\\[ ... \\]``, ``\\boxed{}``).

The configs' paper-scale prompts (``tables.cases`` of ``config/paper.yaml``) are these user turns; a reproduced
answer is put beside the paper's by :func:`match` (same kind, same user turns up to and including this one).
"""
from __future__ import annotations

from dataclasses import dataclass

SOURCE = "the paper (arXiv 2509.26328)"
KIND_TABLE = {"single_turn": "table5", "multi_turn": "table6"}
TABLE_WHERE = {"table5": "Table 5 (single-turn dialogue cases of Fast-dLLM v2 7B)",
               "table6": "Table 6 (multi-turn dialogue cases of Fast-dLLM v2 7B)"}


@dataclass(frozen=True)
class PaperCase:
    table: str  # "table5" | "table6"
    title: str  # the paper's case heading, e.g. "Math"
    turns: tuple[tuple[str, str], ...]  # (user, the paper's assistant answer)

    @property
    def users(self) -> list[str]:
        return [u for u, _ in self.turns]


@dataclass(frozen=True)
class PaperTurn:
    table: str
    title: str
    turn: int  # 1-based
    user: str
    answer: str


_ASYMPTOTES = r"""To determine the number of vertical asymptotes of the function \( y = \frac{2}{x^2 + x - 6} \), we need to identify the values of \( x \) that make the denominator zero, as these values will cause the function to approach infinity, indicating a vertical asymptote.

First, we factor the denominator \( x^2 + x - 6 \). We look for two numbers that multiply to \(-6\) and add up to \(1\). These numbers are \(3\) and \(-2\). Therefore, we can factor the quadratic as follows:
\[
x^2 + x - 6 = (x + 3)(x - 2)
\]
So the function can be rewritten as:
\[
y = \frac{2}{(x + 3)(x - 2)}
\]
The denominator is zero when \( x + 3 = 0 \) or \( x - 2 = 0 \). Solving these equations, we get:
\[
x = -3 \quad \text{and} \quad x = 2
\]
Since the function is undefined at \( x = -3 \) and \( x = 2 \), there are vertical asymptotes at these points. Therefore, the function \( y = \frac{2}{x^2 + x - 6} \) has two vertical asymptotes.

The number of vertical asymptotes is \(\boxed{2}\)"""

_HANOI = """```python
def tower_of_hanoi(n, source, target, auxiliary):
    if n > 0:
        tower_of_hanoi(n - 1, source, auxiliary, target)
        print(f"Move disk {n} from {source} to {target}")
        tower_of_hanoi(n - 1, auxiliary, target, source)

tower_of_hanoi(3, 'A', 'C', 'B')
```

This function solves the Tower of Hanoi problem using recursion. It takes four parameters: n (the number of disks), source (the starting peg), target (the destination peg), and auxiliary (the helper peg). The function prints each move in the form of \u201cMove disk n from source to target\u201d."""

_TRUCK_1 = r"""To determine how many trips the delivery truck will need to send out 960 boxes, we start by noting the capacity of the truck in one trip. The truck can carry 120 boxes in one trip. We need to find out how many trips are required to transport 960 boxes.

We can set up the problem as a division problem:
\[ \text{Number of trips} = \frac{\text{Total number of boxes}}{\text{Capacity of the truck per trip}} \]

Substituting the given values into the equation, we get:
\[ \text{Number of trips} = \frac{960}{120} \]

Next, we perform the division:
\[ \frac{960}{120} = 8 \]

Therefore, the truck will need \(\boxed{8}\) trips to send out 960 boxes."""

_TRUCK_2 = r"""To determine the total time required to deliver all the boxes, we need to follow these steps:

1. Calculate the number of trips required.

2. Determine the total time taken for all the trips.

3. Convert the total time from minutes to hours and minutes.

Step 1: Calculate the number of trips required.

The warehouse needs to send out 960 boxes, and the truck can carry 120 boxes per trip. Therefore, the number of trips required is:
\[ \text{Number of trips} = \frac{960}{120} = 8 \]

Step 2: Determine the total time taken for all the trips.

Each trip takes 45 minutes, so the total time taken for 8 trips is:
\[ \text{Total time} = 8 \times 45 = 360 \text{ minutes} \]

Step 3: Convert the total time from minutes to hours and minutes.

There are 60 minutes in an hour, so we convert 360 minutes to hours by dividing by 60:
\[ 360 \div 60 = 6 \text{ hours} \]

Therefore, the total time required to deliver all the boxes is:
\[ \boxed{6 \text{ hours}} \]"""

CASES: list[PaperCase] = [
    # ---- Table 5: single-turn dialogue cases
    PaperCase("table5", "Math", (
        (r"How many vertical asymptotes does the graph of \(y=\frac{2}{x^2+x-6}\) have?", _ASYMPTOTES),)),
    PaperCase("table5", "Code", (
        ("Write a recursive Python function to solve the Tower of Hanoi problem and print each move.", _HANOI),)),
    # ---- Table 6: multi-turn dialogue cases
    PaperCase("table6", "Daily life", (
        ("When was NVIDIA founded?", "NVIDIA was founded in 1993."),
        ("Using the year you just gave me, calculate how many years NVIDIA has been in business as of 2025.",
         "NVIDIA has been in business for 32 years as of 2025."),
        ("How many years will it be until NVIDIA's 40th anniversary?",
         "NVIDIA's 40th anniversary will be in 2033, which is 8 years from now."),
    )),
    PaperCase("table6", "Math", (
        ("A delivery truck can carry 120 boxes in one trip. If a warehouse needs to send out 960 boxes, how many "
         "trips will the truck need?", _TRUCK_1),
        ("If each trip takes 45 minutes, how long will it take to deliver all boxes in total? Give your answer in "
         "hours and minutes.", _TRUCK_2),
    )),
]


def _norm(s: str) -> str:
    return " ".join(str(s).split())


def cases_of(kind: str) -> list[PaperCase]:
    """The paper's cases for ``single_turn`` (Table 5) or ``multi_turn`` (Table 6)."""
    return [c for c in CASES if c.table == KIND_TABLE[kind]]


def conversations(kind: str) -> list[list[str]]:
    """The paper's user turns of ``kind``, in the configs' form (single_turn: one prompt per case)."""
    convs = [c.users for c in cases_of(kind)]
    return [c[0] for c in convs] if kind == "single_turn" else convs


def match(kind: str, user_turns) -> PaperTurn | None:
    """The paper's answer to the last of ``user_turns`` when the conversation so far is one of the paper's
    (same user turns, whitespace-insensitive); None for any other prompt."""
    if kind not in KIND_TABLE:
        raise ValueError(f"kind must be one of {sorted(KIND_TABLE)}, got {kind!r}")
    want = [_norm(u) for u in user_turns]
    if not want:
        return None
    for c in cases_of(kind):
        if len(want) <= len(c.turns) and [_norm(u) for u in c.users[: len(want)]] == want:
            user, answer = c.turns[len(want) - 1]
            return PaperTurn(c.table, c.title, len(want), user, answer)
    return None
