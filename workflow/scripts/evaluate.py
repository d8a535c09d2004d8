"""Accuracy of one model on its tasks at several decoding points each, through fastdllm_core.evaluation.run_task
(model loaded once, and only when some point must be measured; every task's data is checked before).  A task that
cannot load its data offline becomes one ``status = n/a`` row with the reason (never a number).  Each point's rows
are cached under ``<model>/<task>/<point>.csv`` with a key covering the model checkpoint's contents, the data
file(s) and data-choosing environment variables (jobs.data_fingerprint), evaluation settings and fastdllm_core's
code; a point whose key matches is reused -- never a point with only ``n/a`` rows (tried again on every run).  A
point split into shards (``eval.shards``, rule evaluate_shard) is merged from its shards' per-item results."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    import json
    from pathlib import Path

    from fastdllm_core.provenance import config_hash, write_csv_atomic, write_json_atomic
    from fastdllm_dag.job import common as jobs
    from fastdllm_dag.job import eval_point
    from fastdllm_dag.plan import eval_cost

    def merged_rows(files: list[str]) -> list[dict]:
        """A sharded point's rows: merged from its shards' per-item results (fastdllm_core.evaluation.shards), or
        the first shard's n/a rows when a shard has no measurement."""
        from fastdllm_core.evaluation.shards import merge_shards

        parts = [json.loads(Path(f).read_text()) for f in files]
        # one part: the whole point, run in its own job
        if len(parts) == 1 or not all(any(r["status"] == "ok" for r in part["rows"]) for part in parts):
            return parts[0]["rows"]
        return merge_shards(parts)

    p, config = sm.params, sm.config
    unavailable = config["models"][p.model].get("train_unavailable")  # workflow/fastdllm_dag/plan/data.py
    if unavailable:  # a model to be trained here without training data: n/a rows naming the keys to set
        rows = jobs.na_rows(p, config, unavailable, p.points)  # nothing loaded: its table row says why it is empty
        write_csv_atomic(sm.output[0], rows)
        print(f"{p.model}: {len(rows)} n/a rows ({unavailable}) -> {sm.output[0]}")
    else:
        device = jobs.require_device(config)
        model_files = jobs.model_fingerprint(p.source, sm.input.model)  # contents (a replaced checkpoint changes it)
        code = jobs.code_fingerprint()
        rows_by_point, todo = {}, []
        for task, points in p.points.items():
            data_path = p.data_paths[task]
            bkey = eval_point.base_key(p, config, task, data_path, device, model_files, code)
            for point in points:
                key = config_hash(dict(bkey, point=point))
                kf, cf = Path(p.cache_dir) / task / f"{point}.key.json", Path(p.cache_dir) / task / f"{point}.csv"
                cached = jobs.cached_rows(kf, cf, key)
                if cached is not None:
                    rows_by_point[(task, point)] = cached
                    print(f"{task} {point}: reused (same model, data, settings and code)")
                else:
                    todo.append((task, point, key, bkey))
        # points split into shards (eval.shards: workflow/fastdllm_dag/plan/eval_cost.py): merged from the shards' items
        sharded = eval_cost.job_shards(config, {"model": p.model, "points": p.points})
        shard_files = {Path(f).name[:-len(".json")]: f for f in getattr(sm.input, "shards", [])}
        here = {t: p.data_paths[t] for t, pt, *_ in todo if (t, pt) not in sharded}  # measured in this job
        if here:  # unavailable data or a gated model: n/a rows below, not a failure
            loaded, reason = jobs.checked_and_loaded(p, config, device, here)
        for task, point, key, bkey in todo:
            cache = Path(p.cache_dir) / task
            if (task, point) in sharded:
                rows = merged_rows([shard_files[s] for s in sharded[(task, point)]])
                print(f"{task} {point}: merged from {len(sharded[(task, point)])} shards")
            elif loaded is None:
                rows = jobs.na_rows(p, config, reason, {task: [point]})
            else:
                rows = eval_point.run_point(loaded, p, config, task, point, p.data_paths[task], device, cache / point)
            write_csv_atomic(cache / f"{point}.csv", rows)
            if any(r["status"] == "ok" for r in rows):  # a measurement: keyed for reuse
                write_json_atomic(cache / f"{point}.key.json", {"key": key, "inputs": dict(bkey, point=point)})
            else:  # n/a only (missing data or extra): tried again on every run
                (cache / f"{point}.key.json").unlink(missing_ok=True)
            rows_by_point[(task, point)] = rows
            print(f"{task} {point}: " + ", ".join(f"{r['metric']}={r['value']} ({r['status']})" for r in rows))
        out = [r for task, points in p.points.items() for point in points for r in rows_by_point[(task, point)]]
        write_csv_atomic(sm.output[0], out)
        print(f"{len(out)} rows -> {sm.output[0]}")
