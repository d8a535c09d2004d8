"""Estimated cost of an evaluation point and its split into shards that fit one cluster job (``eval.shards``).

Cost of one (model, task, point) = items x forwards per item x tokens per forward, in *token-forwards* (tokens
passed through the model), from the decoding point (P: prompt tokens, G: generation length):

* ``ar``: the prompt once, then one token per forward: P + G.
* ``bd`` (Fast-dLLM v2): the prompt once, then at most G forwards (threshold decoding unmasks >= 1 token per
  forward) over one block (one sub-block with the sub-block cache): P + G x block.  An upper bound.
* ``llada`` / ``dream``: ``steps`` forwards over prompt and generation: steps x (P + G).
* ``v1`` (Fast-dLLM v1, G / block blocks, steps shared by the blocks): cache ``none`` as llada; ``prefix`` one
  full forward per block, the other steps over the generation (P + G upper bound of the suffix: G);
  ``dual`` one full forward per block, the other steps over one block.  Upper bounds (steps, not thresholds).
* multiple choice (mmlu, gpqa, synth_mc): :data:`CHOICES` options, each one forward over P tokens, on a
  masked-diffusion model x ``mc_num`` (``eval.mdm_loglikelihood: mc``) or x the 2**k - 1 mask patterns of its k
  tokens (:data:`OPTION_TOKENS`) when scored exactly (``exact``, or ``auto`` where that is no dearer).

Items: the local data file's line count (a directory: its ``*.jsonl`` together), the synthetic suite's ``n_eval``,
else the benchmark's official test size (:data:`OFFICIAL_ITEMS`), cut by the point's ``@N`` or ``eval.limit`` (per
subtask: lm-eval's limit).
Minutes = token-forwards / ``eval.shards.token_forwards_per_s`` / 60.  A point over ``eval.shards.job_minutes`` is
split into ceil(minutes / job_minutes) shards over contiguous item ranges (:func:`shard_jobs`; every task: lm-eval's
through ``samples=``, GPQA's random few-shot draws kept as unsharded, EvalPlus' over its sorted problems), and a
point that would take its evaluation job past the budget runs in its own job."""
from __future__ import annotations

import functools
import math
import os
from pathlib import Path

from fastdllm_core.decode_config import MDM_MODES, DecodeConfig
from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import points as plan_points

# official test sizes: GSM8K test (openai/gsm8k), MATH test (EleutherAI/hendrycks_math, lm-eval minerva_math),
# HumanEval+ (EvalPlus), MBPP+ v0.2.0 (EvalPlus), IFEval (google/IFEval), MMLU test (cais/mmlu), GPQA main
# (Idavidrein/gpqa, lm-eval gpqa_main_n_shot)
OFFICIAL_ITEMS = {"gsm8k": 1319, "minerva_math": 5000, "humaneval": 164, "mbpp": 378, "ifeval": 541, "mmlu": 14042,
                  "gpqa": 448}
SUBTASKS = {"minerva_math": 7, "mmlu": 57}  # lm-eval leaves (eval.limit applies to each)
# assumed prompt tokens (chat template included) where eval.shards.prompt_tokens does not set a task's
PROMPT_TOKENS = {"minerva_math": 300, "gsm8k": 200, "ifeval": 120, "mmlu": 700, "gpqa": 1500, "humaneval": 250,
                 "mbpp": 250}
DEFAULT_PROMPT_TOKENS = 256
# generation length of max_new_tokens: task (lm-eval max_gen_toks, EvalPlus' 768; lm-eval's default 256)
TASK_GEN_TOKENS = {"humaneval": 768, "mbpp": 768, "ifeval": 1280, "minerva_math": 1024}
MC_TASKS = ("mmlu", "gpqa", "synth_mc")
CHOICES = 4
# tokens of an option under the chat template (the Qwen2.5 tokenizer; fastdllm_core.evaluation.task_common.encode_pair):
# MMLU's letters 1 ("A"), GPQA's "(A)" 2 ("(A", ")"), the stand-in's letters 1
OPTION_TOKENS = {"mmlu": 1, "gpqa": 2, "synth_mc": 1}
EXACT_MAX_TOKENS = 10  # fastdllm_core.evaluation.likelihood's (not imported here: no torch at DAG parse)


def shard_config(config: dict) -> dict | None:
    """``eval.shards`` (None: never shard)."""
    return (config.get("eval") or {}).get("shards") or None


def n_items(config: dict, task: str, point: str) -> int:
    """Test items of ``task`` at ``point``: the local file's lines (else the official size), cut by the limit."""
    path = plan.eval_path(config, task)
    n = None
    if path and os.path.isdir(path):
        n = sum(_lines(p) for p in sorted(Path(path).glob("*.jsonl")))
    elif path and os.path.isfile(path):
        n = _lines(Path(path))
    if n is None and task in plan.TASK_DATA_KEYS:  # the synthetic suite's test set (built by the DAG)
        n = int(config["data"].get("synthetic", {}).get("n_eval", 0)) or None
    if n is None:
        n = OFFICIAL_ITEMS.get(task)
    if n is None:
        raise ValueError(f"eval.shards: no local data file (data.eval_paths.{task}) and no official size for task "
                         f"{task!r}: set data.eval_paths.{task}")
    limit = plan_points.point_limit(point) or config["eval"].get("limit")
    return min(n, limit * SUBTASKS.get(task, 1)) if limit else n


def _lines(p: Path) -> int:
    st = os.stat(p)
    return _count_lines(str(p), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=None)
def _count_lines(path: str, mtime_ns: int, size: int) -> int:
    """Non-empty lines of ``path``, counted once per version of the file (its mtime and size)."""
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def gen_tokens(config: dict, task: str, decode: DecodeConfig, mode: str) -> int:
    """The point's own generation length (masked diffusion), else ``decode.max_new_tokens`` (``task``: the
    benchmark's, :data:`TASK_GEN_TOKENS`)."""
    if mode in MDM_MODES:
        return int(decode.max_new_tokens)
    mnt = config["decode"]["max_new_tokens"]
    return TASK_GEN_TOKENS.get(task, 256) if str(mnt) == "task" else int(mnt)


def option_forwards(config: dict, task: str, mode: str) -> int:
    """Forwards of one multiple-choice option: a masked-diffusion row's ``mc_num`` samples, or the ``2**k - 1`` mask
    patterns of its ``k`` tokens when scored exactly (``auto`` resolves as likelihood.resolve_mdm_method: exact when
    no dearer than the estimate); one on every other row (an upper bound: one-token options share one)."""
    if mode not in MDM_MODES:
        return 1
    k, mc_num = OPTION_TOKENS.get(task, 1), int(config["eval"].get("mc_num", 128))
    method = config["eval"].get("mdm_loglikelihood", "mc")
    exact = method == "exact" or (method == "auto" and k <= EXACT_MAX_TOKENS and 2 ** k - 1 <= mc_num)
    return 2 ** k - 1 if exact else mc_num


def item_cost(config: dict, task: str, point: str) -> int:
    """Token-forwards of one item of ``task`` at ``point`` (the module's formulas)."""
    mode = DecodeConfig.slug_mode(point)
    d = DecodeConfig.from_slug(point.split("@")[0]).with_mode_defaults(mode)
    own = (shard_config(config) or {}).get("prompt_tokens") or {}
    p = int(own.get(task, PROMPT_TOKENS.get(task, DEFAULT_PROMPT_TOKENS)))
    if task in MC_TASKS:
        return CHOICES * p * option_forwards(config, task, mode)
    g = gen_tokens(config, task, d, mode)
    if mode == "ar":
        return p + g
    if mode == "bd":
        return p + g * (d.sub_block_size if d.use_sub_block_cache else d.block_size)
    if mode in ("llada", "dream") or d.cache == "none":
        return int(d.steps) * (p + g)
    blocks = max(1, g // d.block_size)
    rest = max(0, int(d.steps) - blocks)
    return blocks * (p + g) + rest * (g if d.cache == "prefix" else d.block_size)


def point_cost(config: dict, task: str, point: str) -> tuple[int, float]:
    """(token-forwards, minutes at ``eval.shards.token_forwards_per_s``) of one point on all its items."""
    tf = n_items(config, task, point) * item_cost(config, task, point)
    return tf, tf / float(shard_config(config)["token_forwards_per_s"]) / 60.0


def n_shards(config: dict, task: str, point: str) -> int:
    """Shards of a point: ceil(minutes / job_minutes), at most its item count; 1 without ``eval.shards``."""
    sc = shard_config(config)
    if not sc:
        return 1
    minutes = point_cost(config, task, point)[1]
    return max(1, min(n_items(config, task, point), math.ceil(minutes / float(sc["job_minutes"]))))


def shard_name(model: str, task: str, point: str, k: int, n: int) -> str:
    """``<model>.<task>.<point>.s<k>of<n>`` (``@`` of a point written ``-at``), safe for paths."""
    return f"{model}.{task}.{point.replace('@', '-at')}.s{k}of{n}"


def shard_jobs(config: dict) -> dict[str, dict]:
    """``{shard: {model, task, point, k, n}}``: every point split in n > 1 shards (:func:`n_shards`), and every
    point that would take its evaluation job past ``job_minutes`` (its points in order, each added while the job's
    estimate stays within the budget) run alone as shard 1 of 1 (the whole point in its own job)."""
    out: dict[str, dict] = {}
    if not shard_config(config):
        return out
    budget = float(shard_config(config)["job_minutes"])
    for job in plan_points.evaluation_jobs(config).values():
        if config["models"][job["model"]].get("train_unavailable"):  # n/a rows, written by its evaluate job
            continue
        used = 0.0
        for t, pts in job["points"].items():
            for p in pts:
                n, minutes = n_shards(config, t, p), point_cost(config, t, p)[1]
                if n == 1 and used + minutes <= budget:
                    used += minutes
                    continue
                for k in range(1, n + 1):
                    out[shard_name(job["model"], t, p, k, n)] = {"model": job["model"], "task": t, "point": p,
                                                                 "k": k, "n": n}
    return out


def job_shards(config: dict, job: dict, shards: dict | None = None) -> dict[tuple[str, str], list[str]]:
    """(task, point) of an evaluation job -> its shard names (points run whole are absent).  ``shards``: the
    run's :func:`shard_jobs` (computed here when None)."""
    out: dict[tuple[str, str], list[str]] = {}
    for s, sj in (shard_jobs(config) if shards is None else shards).items():
        if sj["model"] == job["model"] and sj["point"] in job["points"].get(sj["task"], []):
            out.setdefault((sj["task"], sj["point"]), []).append(s)
    return out


def job_cost_summary(config: dict, job: dict, shards: dict | None = None) -> str:
    """``; estimated cost <token-forwards>, <minutes> min (budget ...)`` of an evaluation job (the points it runs
    itself), with the points merged from shards or run in their own jobs; empty without ``eval.shards``.
    ``shards``: the run's :func:`shard_jobs` (computed here when None)."""
    sc = shard_config(config)
    if not sc:
        return ""
    shards = job_shards(config, job, shards)
    whole, split, alone = 0.0, [], []
    for t, pts in job["points"].items():
        for p in pts:
            if (t, p) not in shards:
                whole += point_cost(config, t, p)[0]
            elif len(shards[(t, p)]) > 1:
                split.append(f"{t} {p} in {len(shards[(t, p)])} shards")
            else:
                over = point_cost(config, t, p)[1] > float(sc["job_minutes"])
                alone.append(f"{t} {p}" + (" (over the budget: a single item)" if over else ""))
    minutes = whole / float(sc["token_forwards_per_s"]) / 60.0
    text = f"; estimated cost {whole:.3g} token-forwards, {minutes:.1f} min (budget {sc['job_minutes']} min)"
    if split:
        text += "; merged from shards: " + ", ".join(split)
    if alone:
        text += "; taken from their own jobs: " + ", ".join(alone)
    return text


def shard_cost_summary(config: dict, sj: dict) -> str:
    """Dry-run message of an evaluate_shard job: its point, which shard, its estimated cost and the budget."""
    tf, minutes = point_cost(config, sj["task"], sj["point"])
    budget = float(shard_config(config)["job_minutes"])
    which = f"shard {sj['k']} of {sj['n']}" if sj["n"] > 1 else "the whole point in its own job"
    over = "; over the budget with one item per shard (no finer split)" if minutes / sj["n"] > budget else ""
    return (f"model {sj['model']}; {sj['task']} {sj['point']}: {which}; estimated cost {tf / sj['n']:.3g} "
            f"token-forwards, {minutes / sj['n']:.1f} min (budget {shard_config(config)['job_minutes']} min){over}")
