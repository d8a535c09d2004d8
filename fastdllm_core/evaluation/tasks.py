"""lm-eval task configurations: the paper's tasks through lm-eval's own definitions, with every dataset
location overridable by a local file, and the synthetic arithmetic task over local JSONL.

* ``gsm8k`` / ``synth_arith``: lm-eval's ``gsm8k`` YAML (prompt ``"Question: {question}\\nAnswer:"``, filters
  ``strict-match`` = ``#### N`` and ``flexible-extract`` = last number, exact match ignoring ``,``/``$``/final
  ``.``), zero-shot (the paper's protocol) with the chat template.  ``data_path``: GSM8K-form JSONL.
  ``prompt_style="boxed"``: the reference implementation's variant, the cue ``Answer:`` replaced by
  ``Please reason step by step, and put your final answer within \\boxed{}.`` plus a ``boxed`` filter.
* ``synth_math`` / ``synth_mc`` / ``synth_ifeval``: the stand-ins of MATH / MMLU / IFEval over local JSONL
  (:mod:`fastdllm_core.synthetic.lm_eval_tasks`).  ``data_path``: the test file or the suite directory.
* ``minerva_math`` (group of 7), ``mmlu`` (group of 57), ``ifeval``, ``gpqa`` (``gpqa_main_n_shot``, 5-shot):
  lm-eval's task definitions unchanged.  ``data_path``: for a single task a JSONL file with the Hub dataset's
  columns; for a group a directory holding ``<subtask>.jsonl`` per subtask (e.g. ``mmlu_anatomy.jsonl``).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

from .task_common import TaskUnavailable, local_test_file, offline, shared_dir

BOXED_CUE = "Please reason step by step, and put your final answer within \\boxed{}."
LM_EVAL_NAME = {"gsm8k": "gsm8k", "synth_arith": "gsm8k", "minerva_math": "minerva_math", "ifeval": "ifeval",
                "mmlu": "mmlu", "gpqa": "gpqa_main_n_shot"}
PAPER_FEWSHOT = {"gsm8k": 0, "synth_arith": 0, "minerva_math": 0, "ifeval": 0, "mmlu": 0, "gpqa": 5}
HUB_HINT = {"minerva_math": "EleutherAI/hendrycks_math", "ifeval": "google/IFEval", "mmlu": "cais/mmlu",
            "gpqa": "Idavidrein/gpqa (gated: accept its terms on the Hub and set HF_TOKEN)"}


# the first lm-eval with lm_eval.tasks._yaml_loader and TaskManager.task_index of typed entries (kind, yaml_path,
# tags), which official_config / leaf_tasks read; pyproject.toml and environment.yml require it
LM_EVAL_MIN = "0.4.12"


def check_lm_eval_version(version: str | None = None) -> None:
    """Refuse an lm-eval older than :data:`LM_EVAL_MIN` (``RuntimeError`` naming the version and the fix)."""
    from importlib.metadata import version as installed

    from packaging.version import Version

    v = version or installed("lm_eval")
    if Version(v) < Version(LM_EVAL_MIN):
        raise RuntimeError(f"lm-eval {v} is too old: the task definitions need lm-eval >= {LM_EVAL_MIN} "
                           f"(lm_eval.tasks._yaml_loader, TaskManager.task_index); fix: pip install -U "
                           f"'lm-eval[math,ifeval]>={LM_EVAL_MIN}'")


# the folders of lm_eval/tasks that define each official task used here (its groups, tags and subtasks; the
# minerva_math group is in benchmarks/)
LM_EVAL_FOLDER = {"gsm8k": ("gsm8k",), "minerva_math": ("minerva_math", "benchmarks"), "ifeval": ("ifeval",),
                  "mmlu": ("mmlu",), "gpqa_main_n_shot": ("gpqa",)}


@functools.lru_cache(maxsize=None)
def _task_manager(name: str | None = None):
    """lm-eval's task index for the official task ``name``: only the folders that define it (indexing all of
    lm-eval's ~15,000 task YAMLs takes 10-40 s per process, once in every evaluation job; the task's configs are
    the same).  None: an empty index, for tasks given as configs (the stand-ins).  A name not in
    :data:`LM_EVAL_FOLDER`: the whole index.  Built once per process."""
    check_lm_eval_version()
    import lm_eval
    from lm_eval.tasks import TaskManager

    if name is not None and name not in LM_EVAL_FOLDER:
        return TaskManager()
    folders = [] if name is None else [Path(lm_eval.__file__).parent / "tasks" / f for f in LM_EVAL_FOLDER[name]]
    return TaskManager(include_path=[str(f) for f in folders] or None, include_defaults=False)


def official_config(tm, name: str) -> dict:
    """The full YAML config of a registered lm-eval task (functions resolved)."""
    from lm_eval.tasks._yaml_loader import load_yaml

    entry = tm.task_index.get(name)
    if entry is None or entry.yaml_path is None:
        raise KeyError(f"lm-eval has no YAML task {name!r}")
    cfg = dict(load_yaml(entry.yaml_path, resolve_func=True))
    for k in ("tag", "group", "task_list"):
        cfg.pop(k, None)
    return cfg


def leaf_tasks(tm, name: str) -> list[str]:
    """The leaf task names of a registered lm-eval task or group."""
    from lm_eval.tasks._yaml_loader import load_yaml

    entry = tm.task_index.get(name)
    if entry is None:
        raise KeyError(f"lm-eval has no task {name!r}")
    if entry.kind.name != "GROUP":
        return [name]
    cfg = load_yaml(entry.yaml_path, resolve_func=False)
    out = []
    for child in cfg.get("task", []):
        cname = child if isinstance(child, str) else child.get("task") or child.get("group")
        if cname in tm.task_index and tm.task_index[cname].kind.name == "TAG":
            out += [n for n, e in tm.task_index.items() if cname in e.tags and e.kind.name == "TASK"]
        else:
            out += leaf_tasks(tm, cname)
    return sorted(set(out))


def _gsm8k_form(tm, task: str, path: Path, prompt_style: str) -> dict:
    cfg = official_config(tm, "gsm8k")
    cfg.update(task=task, dataset_path="json", dataset_name=None,
               dataset_kwargs={"data_files": {"test": str(path)}}, training_split=None, fewshot_split=None,
               test_split="test", num_fewshot=PAPER_FEWSHOT[task])
    if prompt_style == "boxed":
        cfg["doc_to_text"] = "Question: {{question}}\n" + BOXED_CUE
        cfg["filter_list"] = [{"name": "boxed", "filter": [
            {"function": "regex", "regex_pattern": r"\\boxed\{([^{}]*)\}", "group_select": -1},
            {"function": "take_first"}]}] + list(cfg["filter_list"])
    elif prompt_style != "paper":
        raise ValueError(f"prompt_style {prompt_style!r} is not defined for {task}; choose paper or boxed")
    cfg.setdefault("metadata", {})
    return cfg


def resolve_gsm8k_path(task: str, data_path) -> Path | None:
    """A local GSM8K-form file for ``task`` or None (use the Hub)."""
    env = "FASTDLLM_SYNTH_ARITH_PATH" if task == "synth_arith" else "FASTDLLM_GSM8K_PATH"
    p = data_path or os.environ.get(env)
    if task == "gsm8k" and not p:
        cand = shared_dir() / "data/gsm8k/test.jsonl"
        if cand.is_file():
            p = cand
    if not p:
        if task == "synth_arith":
            raise TaskUnavailable("synth_arith needs its test file: pass data_path=<suite dir>/arith_test.jsonl "
                                  "(written by synthetic.write_suite) or set FASTDLLM_SYNTH_ARITH_PATH")
        if offline():
            raise TaskUnavailable("gsm8k: offline and no local file; pass data_path=<gsm8k test.jsonl> or set "
                                  "FASTDLLM_GSM8K_PATH (or FASTDLLM_SHARED_DIR containing data/gsm8k/test.jsonl)")
        return None
    p = Path(p)
    if p.is_dir():
        p = p / ("arith_test.jsonl" if task == "synth_arith" else "test.jsonl")
    if not p.is_file():
        raise TaskUnavailable(f"{task} dataset not found: {p} (fix data_path= or ${env})")
    return p


LOCAL_STAND_INS = {"synth_math": "math_test.jsonl", "synth_mc": "mc_test.jsonl", "synth_ifeval": "ifeval_test.jsonl"}


def resolve_stand_in_path(task: str, data_path) -> Path:
    """The local test file of a stand-in task (``data_path``: the file or the suite directory)."""
    env = f"FASTDLLM_{task.upper()}_PATH"
    return local_test_file(data_path, env, LOCAL_STAND_INS[task],
                           f"{task} needs its test file: pass data_path=<suite dir>/{LOCAL_STAND_INS[task]} "
                           f"(written by synthetic.write_suite) or set {env}",
                           f"{task} dataset not found: {{p}} (fix data_path= or ${env})")


# lm-eval's gpqa/n_shot/utils.py: ``rng = random.Random(42)``, made once when the module is first imported
GPQA_SHUFFLE_SEED = 42


def restarted_shuffle(process_docs):
    """lm-eval's GPQA ``process_docs`` with its choice shuffle restarted at every call.  The original shuffles each
    item's choices with its module's ``rng``, which every call advances, and lm-eval calls it at every access of
    the split (the few-shot pool, the items' contexts, their scoring): the order of an item's choices, and the
    target letter, then depend on how often the split was processed before in the process (and on what the
    datasets cache holds), so a prompt and its scoring could disagree, and a shard (another process) could see
    other prompts.  Restarted, every call gives the order of a fresh process's first call."""
    import random

    module = getattr(process_docs, "__globals__", {})
    if not isinstance(module.get("rng"), random.Random):
        raise RuntimeError(f"lm-eval's GPQA process_docs ({getattr(process_docs, '__module__', process_docs)!r}) "
                           "no longer shuffles with a module-level random.Random named rng: review "
                           "fastdllm_core.evaluation.tasks.restarted_shuffle for this lm-eval")

    @functools.wraps(process_docs)
    def process(dataset):
        module["rng"] = random.Random(GPQA_SHUFFLE_SEED)
        return process_docs(dataset)

    return process


def build_lm_eval_tasks(task: str, data_path=None, prompt_style: str = "paper") -> tuple[list, dict]:
    """(task specs for ``lm_eval.simple_evaluate``, info about the source and prompt)."""
    if task in LOCAL_STAND_INS:
        if prompt_style != "paper":
            raise ValueError(f"prompt_style {prompt_style!r} is not defined for {task}; use 'paper'")
        from ..synthetic.lm_eval_tasks import config

        path = resolve_stand_in_path(task, data_path)
        return [config(task, path)], {"source": str(path), "task_manager": _task_manager(None)}
    if task in ("gsm8k", "synth_arith"):
        tm = _task_manager("gsm8k")
        path = resolve_gsm8k_path(task, data_path)
        if path is None:  # Hub: lm-eval's own gsm8k with the paper's zero-shot setting
            cfg = official_config(tm, "gsm8k")
            cfg["num_fewshot"] = 0
            if prompt_style == "boxed":
                cfg = _gsm8k_form(tm, "gsm8k", Path("unused"), "boxed") | {
                    k: cfg[k] for k in ("dataset_path", "dataset_name", "dataset_kwargs", "test_split",
                                        "training_split", "fewshot_split") if k in cfg}
            return [cfg], {"source": "hub openai/gsm8k", "task_manager": tm}
        return [_gsm8k_form(tm, task, path, prompt_style)], {"source": str(path), "task_manager": tm}
    if prompt_style == "boxed" and task == "minerva_math":
        raise ValueError("prompt_style='boxed' for minerva_math is not implemented: lm-eval's minerva_math "
                         "already asks for \\boxed answers in its few-shot format; use prompt_style='paper'")
    if prompt_style != "paper":
        raise ValueError(f"prompt_style {prompt_style!r} is not defined for {task}; use 'paper'")
    tm = None
    name = LM_EVAL_NAME[task]
    if data_path is None and offline():
        raise TaskUnavailable(
            f"{task}: the Hugging Face Hub is off (HF_DATASETS_OFFLINE/HF_HUB_OFFLINE) and no local copy was given; "
            f"pass data_path= (a JSONL file with the columns of {HUB_HINT[task]}"
            + (", or a directory of <subtask>.jsonl, one per subtask" if task in ("mmlu", "minerva_math") else "")
            + ")" + ("; MATH and IFEval also need lm-eval's extras (pip install 'lm-eval[math,ifeval]')"
                     if task in ("minerva_math", "ifeval") else ""))
    tm = _task_manager(name)
    leaves = leaf_tasks(tm, name)
    specs = []
    for leaf in leaves:
        cfg = official_config(tm, leaf)
        cfg["num_fewshot"] = PAPER_FEWSHOT[task]
        if task == "gpqa":
            cfg["process_docs"] = restarted_shuffle(cfg["process_docs"])
        if data_path is not None:
            p = Path(data_path)
            f = p / f"{leaf}.jsonl" if p.is_dir() else p
            if not f.is_file():
                raise TaskUnavailable(f"{task}: local file for {leaf} not found: {f} (fix data_path=)")
            # the split lm-eval evaluates: the test split, else the validation split (GPQA has only "train")
            split = cfg.get("test_split") or cfg.get("validation_split") or "test"
            files = {split: str(f)}
            if cfg.get("fewshot_split") and cfg["fewshot_split"] != split:
                files[cfg["fewshot_split"]] = str(f)  # few-shot examples drawn from the same file
            cfg.update(dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": files})
            cfg.pop("validation_split", None) if cfg.get("validation_split") not in files else None
            cfg.pop("training_split", None) if cfg.get("training_split") not in files else None
        specs.append(cfg)
    return specs, {"source": str(data_path) if data_path else f"hub {HUB_HINT[task]}", "task_manager": tm,
                   "leaves": leaves}
