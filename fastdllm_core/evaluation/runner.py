"""``run_task``: score one model on one task and write deterministic result files.

Files in ``out_dir``: ``results.json`` (configuration, metrics, prompt, source, throughput), ``samples.jsonl``
(one line per item: prompt used, raw output, extracted answer, target, correct/status) and ``accuracy.csv``
(tidy rows, one per metric, with :func:`~fastdllm_core.provenance.run_metadata` columns).

Throughput columns come from the decoder's own :class:`~fastdllm_core.decoding.GenerationStats`: tokens up to
and including EOS summed over all batches, divided by the summed synchronised generation wall time
(tokenisation, scoring and lm-eval's bookkeeping excluded).  Multiple-choice tasks (loglikelihood) generate
nothing: their throughput columns are empty.
"""
from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import replace
from pathlib import Path

from ..decode_config import MDM_MODES, MODES, ROW_DECODE_COLUMNS, DecodeConfig
from ..decoding.ar import AR_GENERATION, ar_generation_summary
from ..intervals import row_interval
from ..loading import LoadedModel, load_model
from ..provenance import out_dir_lock, run_metadata, write_csv_atomic, write_json_atomic, write_text_atomic
from .finite import LogitWatch, failed_rows, nonfinite_weights
from .lm_eval_run import run_lm_eval
from .task_common import PROMPT_STYLES, TASKS
from .tasks import LOCAL_STAND_INS, resolve_stand_in_path

log = logging.getLogger(__name__)

CODE_TASKS = ("synth_code", "synth_mbpp", "humaneval", "mbpp")
# EvalPlus' own generation length for its codegen providers (evalplus.provider.base.DecoderBase, max_new_tokens=768;
# make_model does not change it): used for the code tasks when max_new_tokens="task"
EVALPLUS_MAX_NEW_TOKENS = 768
ROW_COLUMNS = ["model", "model_label", "task", "metric", "value", "n", "ci_low", "ci_high", "status", "note", "mode",
               *ROW_DECODE_COLUMNS, "max_new_tokens",
               "max_new_tokens_source", "prompt_style", "num_fewshot",
               "data_source", "batch_size", "total_tokens", "wall_time_s", "tokens_per_s", "tokens_per_forward",
               "nfe", "loglikelihood_method", "mc_num", "ar_generation"]


def _check_args(task, mode, prompt_style, batch_size, limit):
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if prompt_style not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt_style {prompt_style!r}; choose from {', '.join(PROMPT_STYLES)}")
    if prompt_style == "boxed" and task not in ("gsm8k", "synth_arith"):
        raise ValueError(f"prompt_style 'boxed' applies to gsm8k and synth_arith, not {task!r}")
    if prompt_style == "evalplus" and task not in CODE_TASKS:
        raise ValueError(f"prompt_style 'evalplus' applies to code tasks, not {task!r}")
    if not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if limit is not None and (not isinstance(limit, int) or limit <= 0):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")


def _throughput(stats: list) -> dict:
    if not stats:
        return {"total_tokens": "", "wall_time_s": "", "tokens_per_s": "", "tokens_per_forward": "", "nfe": ""}
    tokens = sum(s.total_tokens for s in stats)
    wall = sum(s.wall_time_s for s in stats)
    row_nfe = sum(sum(s.row_nfe) for s in stats)
    return {"total_tokens": tokens, "wall_time_s": round(wall, 6),
            "tokens_per_s": round(tokens / wall, 4) if wall > 0 else "",
            "tokens_per_forward": round(tokens / row_nfe, 4) if row_nfe else "",
            "nfe": sum(s.nfe for s in stats)}


# ------------------------------------------------------------------------------------------------ EvalPlus
def _run_code(lm, task, data_path, prompt_style, limit, out_dir: Path, code_opts: dict, shard=None, progress=None):
    import shutil
    import tempfile

    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".evalplus-", dir=out_dir))  # this run's own, removed afterwards
    try:
        return _run_code_in(scratch, lm, task, data_path, prompt_style, limit, code_opts, shard, progress)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_code_in(scratch: Path, lm, task, data_path, prompt_style, limit, code_opts: dict, shard=None,
                 progress=None):
    """Generate and score the problems (sorted by task id, cut by ``limit``; ``shard`` (k, n): only those of
    :func:`.lm_eval_run.shard_range`, named by their index in the unsharded list); ``progress``: each answer kept
    in ``<progress>.code.jsonl`` as it comes (:func:`.codeeval.generate_kept`)."""
    from . import codeeval
    from .lm_eval_run import shard_range

    ds_file, has_plus, source = codeeval.resolve_dataset(task, data_path, scratch)
    problems = codeeval.read_jsonl(ds_file)
    problems.sort(key=lambda r: _task_sort_key(r["task_id"]))
    if limit:
        problems = problems[:limit]
    ids = shard_range(task, len(problems), shard) if shard is not None else range(len(problems))
    problems = [problems[i] for i in ids]
    prompts = [codeeval.build_prompt(p, lm.tokenizer, prompt_style, task) for p in problems]
    kept = None if progress is None else f"{progress}.code.jsonl"
    texts = codeeval.generate_kept(lm, prompts, kept, desc=task,
                              max_new_tokens=EVALPLUS_MAX_NEW_TOKENS if getattr(lm, "task_lengths", False) else None,
                              names=[f"prompt {i} ({p['task_id']})" for i, p in zip(ids, problems)])
    sols, samples = [], []
    for p, prompt, text in zip(problems, prompts, texts):
        code, has_fn = codeeval.extract_code(text, p["entry_point"])
        sols.append({"task_id": p["task_id"], "solution": code})
        samples.append({"task": task, "task_id": p["task_id"], "prompt": prompt, "raw_output": text,
                        "extracted": code, "has_entry_point": has_fn})
    statuses = codeeval.score(ds_file, task, sols, scratch, base_only=not has_plus, **code_opts)
    for s, st in zip(samples, statuses):
        assert s["task_id"] == st["task_id"]
        s.update(base_status=st["base_status"], plus_status=st["plus_status"], correct=st["base_pass"],
                 correct_plus=st["plus_pass"])
    rows = codeeval.pass_rows(samples, has_plus)
    extra = {"source": source, "dataset_file": str(ds_file), "plus_available": has_plus,
             "n_no_code": sum(1 for s in samples if not s["has_entry_point"]),
             "sandbox": statuses[0].get("sandbox", "") if statuses else "",
             "verdicts_reused": sum(bool(st.get("verdict_reused")) for st in statuses),
             "prompt_template": {"style": prompt_style, "first_prompt": prompts[0] if prompts else None},
             "num_fewshot": 0, "scoring": {"min_time_limit": code_opts.get("min_time_limit", 1.0),
                                           "gt_time_limit_factor": code_opts.get("gt_time_limit_factor", 4.0),
                                           "memory_limit_mb": code_opts.get("memory_limit_mb", 4096)}}
    return rows, samples, extra


def check_data(task: str, data_path, out_dir=None) -> None:
    """Resolve and check a task's local data before any model is loaded, writing nothing: raises
    :class:`TaskUnavailable` naming the fix when it is not here, :class:`.datacheck.DataError` naming the file,
    line and field when it is unusable (not JSON, a field missing or of the wrong type, no items).  Hub tasks
    without ``data_path`` are checked when lm-eval loads them."""
    from .datacheck import check_file

    if task in CODE_TASKS:
        from .codeeval import resolve_dataset

        resolve_dataset(task, data_path, None, check_only=True)
    elif task in ("gsm8k", "synth_arith"):
        from .tasks import resolve_gsm8k_path

        p = resolve_gsm8k_path(task, data_path)
        if p is not None:
            check_file(task, p)
    elif task in LOCAL_STAND_INS:
        check_file(task, resolve_stand_in_path(task, data_path))
    elif data_path is not None and Path(data_path).exists():
        check_file(task, data_path)


def _task_sort_key(tid: str):
    head, _, tail = str(tid).rpartition("/")
    return (head, int(tail)) if tail.isdigit() else (head, 0, tail)


# ------------------------------------------------------------------------------------------------ run_task
def run_task(model, task: str, *, mode: str = "bd", decode: DecodeConfig | None = None, batch_size: int = 8,
             limit: int | None = None, out_dir, data_path=None, prompt_style: str = "paper",
             model_label: str | None = None, seed: int = 0, extra: dict | None = None, device: str = "cpu",
             ar_baseline: str = "hf", code_opts: dict | None = None,
             max_new_tokens: int | str | None = None, truncate_prompts: bool = False,
             mc_num: int = 128, loglikelihood_method: str | None = None, shard: tuple[int, int] | None = None,
             progress: str | None = None) -> list[dict]:
    """Score ``model`` (a source string or a :class:`LoadedModel`) on ``task``; write the result files.

    Raises :class:`TaskUnavailable` when the task's data cannot be loaded here (the message names the fix),
    ``ValueError`` for bad arguments (before any model is loaded), :class:`~fastdllm_core.provenance.OutDirBusy`
    when another run is writing ``out_dir`` (its lock names the holder).  EvalPlus' scratch files live in a
    private temporary directory under ``out_dir``, removed afterwards.  ``extra`` is added to every row and to
    ``results.json``.  ``code_opts``: ``min_time_limit``, ``gt_time_limit_factor``, ``memory_limit_mb``,
    ``parallel`` for EvalPlus, ``verdict_cache`` (a directory: reuse the verdicts of identical checks).
    ``max_new_tokens``: None = ``decode.max_new_tokens`` for every task; an integer overrides it; ``"task"`` =
    the benchmark's own length (lm-eval: the task's ``max_gen_toks``, else lm-eval's default 256; EvalPlus tasks:
    :data:`EVALPLUS_MAX_NEW_TOKENS`).  The length used is the ``max_new_tokens``
    column of every row (empty when the task generates nothing, e.g. multiple choice) and
    ``max_new_tokens_source`` says where it came from.  Masked-diffusion modes (``llada`` / ``dream`` / ``v1``):
    the sampler's generation length is the setting's (``task`` is refused); multiple-choice tasks use the Monte
    Carlo likelihood with ``mc_num`` samples (the ``mc_num`` column), or its exact expectation with
    ``loglikelihood_method="exact"`` (every mask pattern of the continuation; no ``mc_num``).  Every row carries
    the decoding columns of :meth:`DecodeConfig.row_fields` (``gen_length``, ``steps``, ``remasking``, ``alg``,
    ``cache`` ...).  A prompt that does not fit the model's context with ``max_new_tokens`` is refused
    (naming it and both lengths) unless ``truncate_prompts`` (cut from the left; counted in the
    ``truncated_prompts`` column).  ``shard=(k, n)``: the k-th of n item ranges only (:mod:`.shards`; EvalPlus
    tasks: of the sorted, limited problems); ``progress``: a path prefix where each answer is kept as it comes
    (lm-eval's request cache; EvalPlus tasks: ``<progress>.code.jsonl``): a rerun skips the answered items.
    """
    _check_args(task, mode, prompt_style, batch_size, limit)
    decode = (decode or DecodeConfig()).with_mode_defaults(mode).validate(mode)
    task_lengths = str(max_new_tokens).strip().lower() == "task"
    if task_lengths and mode in MDM_MODES:
        raise ValueError(f"max_new_tokens='task' does not apply to mode {mode}: its generation length is part of the "
                         "setting")
    if max_new_tokens is not None and not task_lengths:
        if isinstance(max_new_tokens, bool) or int(max_new_tokens) <= 0:
            raise ValueError(f"max_new_tokens must be a positive integer or 'task', got {max_new_tokens!r}")
        decode = replace(decode, max_new_tokens=int(max_new_tokens)).validate(mode)
    code_opts = dict(code_opts or {})
    bad = set(code_opts) - {"min_time_limit", "gt_time_limit_factor", "memory_limit_mb", "parallel",
                            "verdict_cache"}
    if bad:
        raise ValueError(f"unknown code_opts {sorted(bad)}")
    out_dir = Path(out_dir)
    with out_dir_lock(out_dir, f"evaluation ({task})"):  # a second concurrent writer of out_dir is refused
        return _run_task_locked(model, task, mode, decode, batch_size, limit, out_dir, data_path, prompt_style,
                                model_label, seed, extra, device, ar_baseline, code_opts, truncate_prompts,
                                task_lengths, mc_num, loglikelihood_method, shard, progress)


def _run_task_locked(model, task, mode, decode, batch_size, limit, out_dir, data_path, prompt_style, model_label,
                     seed, extra, device, ar_baseline, code_opts, truncate_prompts, task_lengths, mc_num,
                     loglikelihood_method, shard=None, progress=None):
    check_data(task, data_path, out_dir)  # fails fast with TaskUnavailable, before loading the model
    loaded, lm = _load_lm(model, mode, decode, batch_size, device, ar_baseline, truncate_prompts, task_lengths,
                          mc_num, loglikelihood_method)
    t0 = time.perf_counter()
    rows, samples, info = _scored(lm, loaded.model, task, data_path, prompt_style, limit, seed, out_dir, code_opts,
                                  shard, progress)
    elapsed = time.perf_counter() - t0
    thr = _throughput(lm.gen_stats)
    source = loaded.source
    label = model_label or Path(source.rstrip("/")).name or source
    used, used_len, len_source = _lengths_used(lm, task, task_lengths)
    cfg = {"task": task, "mode": mode, "decode": decode.to_dict(), "batch_size": batch_size, "limit": limit,
           **({"shard": list(shard)} if shard else {}),
           "max_new_tokens": "task" if task_lengths else decode.max_new_tokens,
           "prompt_style": prompt_style, "data_source": info["source"], "model": source, "seed": seed,
           "ar_baseline": ar_baseline if mode == "ar" else None, "extra": extra or {},
           "loglikelihood_method": lm.ll_method_used, "mc_num": lm.mc_num if "mc" in lm.ll_method_used else None,
           "ar_generation": dict(AR_GENERATION) if mode == "ar" else None,
           "stop_when_final": mode == "dream"}
    meta = run_metadata(cfg, seed=seed, device=str(loaded.model.device))
    out_rows = _out_rows(rows, samples, info, lm, task=task, mode=mode, decode=decode, prompt_style=prompt_style,
                         batch_size=batch_size, extra=extra, source=source, label=label, used_len=used_len,
                         len_source=len_source, thr=thr, meta=meta)
    cols = ROW_COLUMNS + ["filter", "truncated_prompts"] + [k for k in (extra or {}) if k not in ROW_COLUMNS] + \
        [c for c in meta if c not in ROW_COLUMNS]
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / "samples.jsonl", "".join(json.dumps(s, sort_keys=True, default=str) + "\n"
                                                          for s in samples))
    write_json_atomic(out_dir / "results.json", {
        "config": cfg, "metrics": rows, "throughput": thr, "throughput_method":
            "tokens up to and including EOS / synchronised generation wall time (decoder GenerationStats)" + (
                "; Dream's sampler with rows leaving the batch once their text is final (stop_when_final: the "
                "same outputs, fewer forwards than the official sampler; its speed is the throughput jobs')"
                if mode == "dream" else ""),
        "elapsed_s": round(elapsed, 3), "metadata": meta, "info": {k: v for k, v in info.items()},
        "requested_max_gen_toks": sorted(lm.requested_max_gen_toks), "used_max_new_tokens": used,
        "truncated_prompts": lm.n_truncated_prompts})
    write_csv_atomic(out_dir / "accuracy.csv", out_rows, cols)
    return out_rows


def _scored(lm, model, task, data_path, prompt_style, limit, seed, out_dir, code_opts, shard, progress):
    """(rows, samples, info) of the task; failed rows (:mod:`.finite`) when the model's weights or the logits it
    computed were not finite."""
    bad = nonfinite_weights(model)
    if bad:
        reason = f"non-finite weights in {len(bad)} parameters (first: {bad[0]}): the model is not scored"
        log.error("%s: %s", task, reason)
        return failed_rows([], reason), [], {"source": ""}
    with LogitWatch(model) as watch:
        if task in CODE_TASKS:
            rows, samples, info = _run_code(lm, task, data_path, prompt_style, limit, out_dir, code_opts, shard,
                                            progress)
        else:
            rows, samples, info = run_lm_eval(lm, task, data_path, prompt_style, limit, seed, shard, progress)
        if watch.met():
            reason = "non-finite logits met during the evaluation: the model is not scored"
            log.error("%s: %s", task, reason)
            rows = failed_rows(rows, reason)
    return rows, samples, info


def _load_lm(model, mode, decode, batch_size, device, ar_baseline, truncate_prompts, task_lengths, mc_num,
             loglikelihood_method):
    """(the loaded model, the lm-eval model ``fast_dllm_v2`` wrapping it with this run's decoding settings)."""
    from .lm_model import FastDLLMv2

    loaded = model if isinstance(model, LoadedModel) else load_model(str(model), device=device,
                                                                    block_size=None)
    lm = FastDLLMv2(model=loaded, mode=mode, **dict(decode.to_dict(), max_new_tokens="task" if task_lengths else
                                                   decode.max_new_tokens),
                    batch_size=batch_size, ar_baseline=ar_baseline, truncate_prompts=truncate_prompts,
                    loglikelihood_method=loglikelihood_method,
                    **({"mc_num": mc_num} if mode in MDM_MODES else {}))
    return loaded, lm


def _out_rows(rows, samples, info, lm, *, task, mode, decode, prompt_style, batch_size, extra, source, label,
              used_len, len_source, thr, meta) -> list[dict]:
    """The ``accuracy.csv`` rows: one per metric of ``rows``, with the run's columns (decoding, lengths used,
    throughput, likelihood method, ``extra``, metadata)."""
    fewshot = _fewshot(info.get("num_fewshot"))
    out_rows = []
    for r in rows:
        row = {"model": source, "model_label": label, "task": task, "metric": r["metric"],
               "value": round(r["value"], 4) if isinstance(r["value"], float) and not math.isnan(r["value"]) else
               r["value"], "n": r["n"], **row_interval(r["metric"], r["value"], r["n"]),
               "status": r.get("status", "ok"),
               "note": r.get("note", ""), "mode": mode,
               **decode.row_fields(mode), "gen_length": used_len,
               "max_new_tokens": used_len, "max_new_tokens_source": len_source,
               "prompt_style": prompt_style, "num_fewshot": fewshot,
               "data_source": info["source"], "batch_size": batch_size, **thr, "filter": r.get("filter", ""),
               "truncated_prompts": lm.n_truncated_prompts, **_likelihood_fields(lm, task),
               "ar_generation": ar_generation_summary() if mode == "ar" else "",
               **{k: v for k, v in (extra or {}).items()}, **meta}
        out_rows.append(row)
    return out_rows


def _likelihood_fields(lm, task) -> dict:
    """How a multiple-choice task was scored: the likelihood method and (masked diffusion) the Monte Carlo
    sample count; empty for tasks that generate."""
    if lm.used_max_new_tokens or task in CODE_TASKS:
        return {"loglikelihood_method": "", "mc_num": ""}
    return {"loglikelihood_method": lm.ll_method_used if lm.mode != "ar" else "causal",
            "mc_num": lm.mc_num if "mc" in lm.ll_method_used else ""}


def _lengths_used(lm, task: str, task_lengths: bool):
    """(generation lengths used, the row's ``max_new_tokens``, where it came from)."""
    used = sorted(lm.used_max_new_tokens)
    used_len = used[0] if len(used) == 1 else "/".join(map(str, used))  # "" when nothing was generated
    len_source = ("" if not used else
                  "fixed (config)" if not task_lengths else
                  "task: EvalPlus default" if task in CODE_TASKS else
                  "task: lm-eval max_gen_toks" if lm.requested_max_gen_toks else "task: lm-eval default")
    return used, used_len, len_source


def _fewshot(fewshot):
    """The number of few-shot examples (one number when every subtask has the same, else the JSON of them)."""
    if isinstance(fewshot, dict):
        return sorted(set(fewshot.values()))[0] if len(set(fewshot.values())) == 1 else json.dumps(fewshot)
    return fewshot
