"""Stand-ins for a rehearsal of the paper-scale DAG on a CPU, offline (``config/rehearsal.yaml``): tiny random
checkpoints in the formats users load (a Hugging Face Qwen2 directory with a Qwen2.5-Instruct-style tokenizer and
chat template, a released-format Fast-dLLM v2 directory, LLaDA and Dream releases) and small evaluation files in
each benchmark's own format.  Nothing here downloads anything; every output is deterministic for its seed.

Stand-in weights are random: numbers measured on them prove that the paper-scale code path runs, never anything
about the paper's models."""
from __future__ import annotations

import json
import random
from pathlib import Path

from .decode_config import BLOCK_SIZE

FORMATS = ("qwen2", "fast_dllm", "llada", "dream")

# The stand-in evaluation files, relative to the data directory, in each benchmark's own format (the forms that
# fastdllm_core.evaluation.datacheck checks): GSM8K JSONL, EvalPlus HumanEval+/MBPP+ JSONL, IFEval JSONL (the
# google/IFEval columns), MATH (one <subtask>.jsonl per lm-eval minerva_math subtask, hendrycks_math columns),
# MMLU (one <subtask>.jsonl per mmlu subtask, cais/mmlu columns), GPQA (Idavidrein/gpqa columns).  ``adapt``: SFT
# rows (prompt / response) standing in for the adaptation data (data.train_files).  ``nemotron``: a copy of the
# LLaMA-Nemotron post-training dataset in its own layout and schema (``SFT/<split>/*.jsonl``, reasoning on and off,
# multi-turn rows), from which the DAG's adaptation_data rule builds the adaptation set (data.adaptation.local_dir).
DATA_FILES = {
    "gsm8k": "gsm8k/test.jsonl",
    "humaneval": "humaneval/HumanEvalPlus.jsonl",
    "mbpp": "mbpp/MbppPlus.jsonl",
    "ifeval": "ifeval/ifeval.jsonl",
    "minerva_math": "minerva_math",
    "mmlu": "mmlu",
    "gpqa": "gpqa/gpqa_main.jsonl",
    "adapt": "sft/adaptation_train.jsonl",
    "nemotron": "nemotron",
}


def write_standin_model(path, fmt: str, seed: int = 0, bd_size: int = BLOCK_SIZE) -> Path:
    """A tiny random checkpoint at ``path`` in format ``fmt`` (:data:`FORMATS`):

    * ``qwen2``: ``Qwen2ForCausalLM`` (``model_type: qwen2``) with a tokenizer carrying Qwen2.5's ChatML template,
      as a Qwen2.5-Instruct download is laid out;
    * ``fast_dllm``: the released Fast-dLLM v2 layout (``model_type: Fast_dLLM_Qwen``, ``bd_size``, the release's
      ``auto_map``, Qwen2 weight names), which ``load_model`` reads without remote code;
    * ``llada`` / ``dream``: the releases' ``config.json``, weight names and tokenizers (:mod:`.modeling`)."""
    if fmt == "qwen2":
        from .tiny import write_tiny_checkpoint

        return write_tiny_checkpoint(path, seed=seed)
    if fmt == "fast_dllm":
        from .tiny import write_tiny_checkpoint

        return write_tiny_checkpoint(path, seed=seed, fast_dllm_format=True, bd_size=bd_size)
    if fmt == "llada":
        from .modeling import llada

        return llada.write_standin(path, seed=seed)
    if fmt == "dream":
        from .modeling import dream

        return dream.write_standin(path, seed=seed)
    raise ValueError(f"unknown stand-in format {fmt!r}; choose one of {', '.join(FORMATS)}")


def _write_jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _gsm8k(n: int, rng: random.Random) -> list[dict]:
    out = []
    for _ in range(n):
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        out.append({"question": f"Ann has {a} pens and buys {b} more. How many pens does she have?",
                    "answer": f"She has {a} + {b} = {a + b} pens.\n#### {a + b}"})
    return out


def _code(n: int, rng: random.Random, form: str) -> list[dict]:
    from .synthetic import code

    keys = code.humaneval_keys() if form == "humaneval" else code.mbpp_keys()
    make = code.humaneval_item if form == "humaneval" else code.mbpp_item
    out = []
    for i, key in enumerate(keys[:n]):
        it = make(key, rng)
        # MBPP ids far from the real ones: EvalPlus rewrites the inputs of some real ids (e.g. Mbpp/2) on load
        task_id = f"HumanEval/{i}" if form == "humaneval" else f"Mbpp/{10000 + i}"
        out.append({"task_id": task_id, **{k: it[k] for k in ("prompt", "canonical_solution", "entry_point", "test",
                                                               "base_input", "plus_input", "atol", "contract")}})
    return out


# IFEval instructions whose checks need no keyword arguments beyond these (lm-eval's instruction registry)
_IFEVAL = [
    ("Write one sentence about the sea without using any commas.", ["punctuation:no_comma"], [{}]),
    ("Describe a cat in lowercase letters only.", ["change_case:english_lowercase"], [{}]),
    ("Name a color. Wrap your entire response in double quotation marks.", ["startend:quotation"], [{}]),
    ("Say hello in fewer than 20 words.", ["length_constraints:number_words"],
     [{"relation": "less than", "num_words": 20}]),
]


def _ifeval(n: int) -> list[dict]:
    return [{"key": 1000 + i, "prompt": p, "instruction_id_list": ids, "kwargs": kw}
            for i, (p, ids, kw) in ((i, _IFEVAL[i % len(_IFEVAL)]) for i in range(n))]


def _math(n: int, rng: random.Random) -> list[dict]:
    out = []
    for _ in range(n):
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        out.append({"problem": f"What is ${a} \\cdot {b}$?", "level": "Level 1", "type": "Prealgebra",
                    "solution": f"We have ${a} \\cdot {b} = {a * b}$, so the answer is $\\boxed{{{a * b}}}$."})
    return out


def _mmlu(n: int, rng: random.Random) -> list[dict]:
    out = []
    for _ in range(n):
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        choices = [str(a + b), str(a + b + 1), str(a * b + 2), str(a + b - 1)]
        out.append({"question": f"What is {a} + {b}?", "subject": "", "choices": choices, "answer": 0})
    return out


def _gpqa(n: int, rng: random.Random) -> list[dict]:
    out = []
    for _ in range(max(n, 6)):  # gpqa_main_n_shot draws 5 few-shot examples from the same file
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        out.append({"Question": f"What is {a} times {b}?", "Correct Answer": str(a * b),
                    "Incorrect Answer 1": str(a * b + 1), "Incorrect Answer 2": str(a + b),
                    "Incorrect Answer 3": str(a * b - 1), "Subdomain": "Arithmetic",
                    "High-level domain": "Mathematics"})
    return out


def _adapt(n: int, rng: random.Random) -> list[dict]:
    rows = []
    for _ in range(n):
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        rows.append({"prompt": f"What is {a} + {b}?", "response": f"{a} + {b} = {a + b}. #### {a + b}"})
    return rows


def _nemotron_rows(n: int, rng: random.Random, split: str) -> list[dict]:
    rows = []
    for i in range(n):
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        think = i % 2 == 0
        msgs = [{"role": "user", "content": f"What is {a} + {b}?"}]
        if i % 3 == 0:  # multi-turn: an earlier exchange before the last user turn
            msgs = [{"role": "user", "content": f"Name the number {a}."}, {"role": "assistant", "content": str(a)},
                    {"role": "user", "content": f"Add {b} to it."}]
        answer = f"{a} + {b} = {a + b}."
        rows.append({"input": msgs, "output": (f"<think>{a} plus {b}.</think>" if think else "") + answer,
                     "reasoning": "on" if think else "off",
                     "system_prompt": f"detailed thinking {'on' if think else 'off'}", "category": split,
                     "license": "cc-by-4.0", "generator": "rehearsal stand-in", "used_in_training": ["Nano"],
                     "version": "v1"})
    return rows


def _nemotron(out_dir: Path, n: int, rng: random.Random) -> None:
    """The LLaMA-Nemotron layout: ``SFT/<split>/<split>.jsonl`` per SFT split, rows in the dataset's schema."""
    from .training.adaptation_data import SUBSETS

    for split in SUBSETS:
        _write_jsonl(out_dir / "SFT" / split / f"{split}_v1.jsonl", _nemotron_rows(n, rng, split))


def lm_eval_leaves(task: str) -> list[str]:
    """The leaf tasks of lm-eval group ``task`` (``minerva_math``, ``mmlu``): one local file each."""
    from .evaluation.tasks import LM_EVAL_NAME, _task_manager, leaf_tasks

    return leaf_tasks(_task_manager(LM_EVAL_NAME[task]), LM_EVAL_NAME[task])


def write_standin_data(out_dir, n_items: int = 8, seed: int = 0, tasks=None, n_train: int = 32) -> dict[str, Path]:
    """The stand-in evaluation files (:data:`DATA_FILES`) under ``out_dir``, ``n_items`` items per task (per
    subtask for the groups), and the adaptation SFT file; returns task -> path (a file, or a directory of
    ``<subtask>.jsonl`` for MATH and MMLU, the forms ``data.eval_paths`` takes)."""
    out_dir = Path(out_dir)
    rng = random.Random(seed)
    tasks = list(tasks or DATA_FILES)
    out = {}
    for task in tasks:
        p = out_dir / DATA_FILES[task]
        if task == "gsm8k":
            _write_jsonl(p, _gsm8k(n_items, rng))
        elif task in ("humaneval", "mbpp"):
            _write_jsonl(p, _code(n_items, rng, task))
        elif task == "ifeval":
            _write_jsonl(p, _ifeval(n_items))
        elif task in ("minerva_math", "mmlu"):
            p.mkdir(parents=True, exist_ok=True)
            for leaf in lm_eval_leaves(task):
                _write_jsonl(p / f"{leaf}.jsonl", (_math if task == "minerva_math" else _mmlu)(n_items, rng))
        elif task == "gpqa":
            _write_jsonl(p, _gpqa(n_items, rng))
        elif task == "adapt":
            _write_jsonl(p, _adapt(n_train, rng))
        elif task == "nemotron":
            _nemotron(p, n_train, rng)
        else:
            raise ValueError(f"no stand-in data for {task!r}; choose from {', '.join(DATA_FILES)}")
        out[task] = p
    return out
