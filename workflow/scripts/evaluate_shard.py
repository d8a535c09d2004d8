"""One shard of a decoding point too costly for one job (``eval.shards``; workflow/fastdllm_dag/plan/eval_cost.py):
items ``shard=(k, n)`` of the point (1 of 1: the whole point, in a job of its own) through
fastdllm_core.evaluation.run_task, written as one JSON (its rows, its per-item
results, its key) that rule evaluate merges into the point's rows.  Every answer is kept as it comes under
``<model>/<task>/<shard>.progress/<key>`` (an lm-eval task: lm-eval's request cache; an EvalPlus task: a JSONL of
its answers): a shard killed (a cluster's time limit) resumes from it, skipping the items answered before; a change
of model, data, settings or code starts a fresh one.  Removed once the shard's file is written."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    import json
    import shutil
    from pathlib import Path

    from fastdllm_core.provenance import config_hash, write_json_atomic
    from fastdllm_dag.job import common as jobs
    from fastdllm_dag.job import eval_point

    p, config = sm.params, sm.config
    sj = p.shard
    task, point = sj["task"], sj["point"]
    if config["models"][p.model].get("train_unavailable"):
        raise ValueError(f"evaluate_shard {sm.wildcards.shard}: model {p.model} has no training data; it is never "
                         "sharded (workflow/fastdllm_dag/plan/eval_cost.py)")
    device = jobs.require_device(config)
    model_files = jobs.model_fingerprint(p.source, sm.input.model)
    bkey = eval_point.base_key(p, config, task, p.data_path, device, model_files, jobs.code_fingerprint())
    key = config_hash(dict(bkey, point=point, shard=[sj["k"], sj["n"]]))
    cache = Path(p.cache_dir) / task
    progress = cache / f"{sm.wildcards.shard}.progress" / key[:16]
    loaded, reason = jobs.checked_and_loaded(p, config, device, {task: p.data_path})  # unavailable: n/a rows
    out_dir = cache / sm.wildcards.shard
    # shard 1 of 1: the whole point in its own job (any task)
    rows = jobs.na_rows(p, config, reason, {task: [point]}) if loaded is None else eval_point.run_point(
        loaded, p, config, task, point, p.data_path, device, out_dir, shard=(sj["k"], sj["n"]) if sj["n"] > 1 else None,
        progress=str(progress / "requests"))
    samples_file = out_dir / "samples.jsonl"
    ok = any(r["status"] == "ok" for r in rows)
    samples = [json.loads(line) for line in open(samples_file)] if ok else []
    write_json_atomic(sm.output[0], {"shard": sj, "key": key, "rows": rows, "samples": samples})
    # done: the progress is not needed again (a rerun answered wholly from it would have no generation statistics)
    shutil.rmtree(progress.parent, ignore_errors=True)
    print(f"{task} {point} shard {sj['k']} of {sj['n']}: {len(samples)} items; "
          + ", ".join(f"{r['metric']}={r['value']} ({r['status']})" for r in rows))
