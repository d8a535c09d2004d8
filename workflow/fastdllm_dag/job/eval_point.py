"""One decoding point of one task through fastdllm_core.evaluation.run_task, for rule evaluate (a whole point) and
rule evaluate_shard (one item range of it, ``shard=(k, n)``): the point's cache key and its rows, a task whose
data cannot be loaded becoming one ``status = n/a`` row with the reason (never a number)."""
from __future__ import annotations

from pathlib import Path

from fastdllm_core.decode_config import MDM_MODES, DecodeConfig
from fastdllm_core.provenance import run_metadata
from fastdllm_dag.job import common as jobs
from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import points as plan_points


def base_key(p, config: dict, task: str, data_path, device: str, model_files, code: str) -> dict:
    """What keys a point's cached rows (the point itself added by the caller): model contents, data, settings,
    code."""
    key = {"source": p.source, "model_files": model_files, "data": jobs.data_fingerprint(data_path),
           "task": task, "mode": p.mode,
           "max_new_tokens": p.max_new_tokens, "batch_size": p.batch_size, "limit": p.limit,
           "seed": config["seed"], "device": device, "dtype": config.get("dtype", "auto"), "code": code}
    if p.mode in MDM_MODES:  # multiple choice on a masked-diffusion model: its likelihood method
        key.update(mdm_loglikelihood=p.mdm_loglikelihood, mc_num=int(p.mc_num))
    return key


def run_point(loaded, p, config: dict, task: str, point: str, data_path, device: str, out_dir: Path,
              **run_opts) -> list[dict]:
    """The rows of ``task`` at ``point`` (``run_opts``: run_task's ``shard`` / ``progress``).  ``p``: the model a
    point is run on, as rule evaluate's params name it: its DAG key ``model``, ``label``, loaded ``source`` and the
    evaluation's settings ``max_new_tokens``, ``batch_size``, ``limit``, ``verdict_cache`` (and, on a
    masked-diffusion model, ``mdm_loglikelihood``, ``mc_num``)."""
    from fastdllm_core.evaluation import TaskUnavailable, run_task

    task_len = str(p.max_new_tokens) == "task"
    # the point's decoder: the model's own (ar, bd, llada, dream) or Fast-dLLM v1 on a masked-diffusion model; a
    # masked-diffusion point fixes its own generation length
    mode = DecodeConfig.slug_mode(point)
    fixed = task_len or mode in MDM_MODES
    decode = DecodeConfig.from_slug(point, **({} if fixed else {"max_new_tokens": int(p.max_new_tokens)}))
    decode = decode.with_mode_defaults(mode).validate(mode)
    point_fields = decode.row_fields(mode) if mode != "ar" else {}
    # the row's training seed and the model it replicates (tables average a model over its seeds)
    extra = {"model_key": p.model, "scale": config["scale"], "point": point,
             "model_group": config["models"][p.model].get("seed_of", p.model),
             "train_seed": plan.train_seed(config, p.model) if "train" in config["models"][p.model] else ""}
    try:
        rows = run_task(loaded, task, mode=mode, decode=decode, batch_size=int(p.batch_size),
                        limit=plan_points.point_limit(point) or p.limit, out_dir=out_dir,
                        data_path=data_path, model_label=p.label, seed=int(config["seed"]),
                        extra=extra, device=device, code_opts={"verdict_cache": p.verdict_cache},
                        max_new_tokens="task" if task_len and mode not in MDM_MODES else None,
                        **({"loglikelihood_method": p.mdm_loglikelihood, "mc_num": int(p.mc_num)}
                           if mode in MDM_MODES else {}), **run_opts)
    except TaskUnavailable as exc:
        reason = jobs.dag_na_reason(task, exc.reason)  # names the config key, not run_task's argument
        print(f"{task} {point}: task unavailable: {reason}")
        rows = [{"model": p.source, "model_label": p.label, "task": task, "metric": "", "value": "",
                 "n": 0, "status": "n/a", "note": reason, "mode": mode, **point_fields,
                 "max_new_tokens": "", **extra,
                 **run_metadata({"task": task, "point": point}, seed=config["seed"], device=device)}]
    for r in rows:  # the DAG's model key in `model`; the loaded source kept beside it
        r["model_source"] = r["model"]
        r["model"] = p.model
    return rows
