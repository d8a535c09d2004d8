"""Accuracy of one model on its tasks at several decoding points each, through fastdllm_core.evaluation.run_task
(model loaded once, and only when some point must be measured; every task's data is checked before).  A task that
cannot load its data offline becomes one ``status = n/a`` row with the reason (never a number).  Each point's rows
are cached under ``<model>/<task>/<point>.csv`` with a key covering the model checkpoint's contents, the data
file(s) and data-choosing environment variables (jobs.data_fingerprint), evaluation settings and fastdllm_core's
code; a point whose key matches is reused -- never a point with only ``n/a`` rows (tried again on every run)."""
import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _log import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    from pathlib import Path

    import jobs
    import plan
    from fastdllm_core.config import MDM_MODES, DecodeConfig
    from fastdllm_core.provenance import config_hash, run_metadata, write_csv_atomic, write_json_atomic

    sm = snakemake  # noqa: F821
    p, config = sm.params, sm.config
    unavailable = config["models"][p.model].get("train_unavailable")  # workflow/lib/plan_data.py
    if unavailable:  # a model to be trained here without training data: n/a rows naming the keys to set
        jobs.write_na_rows(sm.output[0], p, config, unavailable)
    else:
        device = jobs.require_device(config)
        model_files = jobs.model_fingerprint(p.source, sm.input.model)  # contents (a replaced checkpoint changes it)
        code = jobs.code_fingerprint()
        # max_new_tokens: an integer for every task, or "task" (each benchmark's own; the row records the length used)
        task_len = str(p.max_new_tokens) == "task"
        rows_by_point, todo = {}, []
        for task, points in p.points.items():
            data_path = p.data_paths[task]
            base_key = {"source": p.source, "model_files": model_files, "data": jobs.data_fingerprint(data_path),
                        "task": task, "mode": p.mode,
                        "max_new_tokens": p.max_new_tokens, "batch_size": p.batch_size, "limit": p.limit,
                        "seed": config["seed"], "device": device, "dtype": config.get("dtype", "auto"), "code": code}
            if p.mode in MDM_MODES:  # multiple choice on a masked-diffusion model: its likelihood method
                base_key.update(mdm_loglikelihood=p.mdm_loglikelihood, mc_num=int(p.mc_num))
            for point in points:
                key = config_hash(dict(base_key, point=point))
                kf, cf = Path(p.cache_dir) / task / f"{point}.key.json", Path(p.cache_dir) / task / f"{point}.csv"
                cached = jobs.cached_rows(kf, cf, key)
                if cached is not None:
                    rows_by_point[(task, point)] = cached
                    print(f"{task} {point}: reused (same model, data, settings and code)")
                else:
                    todo.append((task, point, key, base_key))
        if todo:
            from fastdllm_core.evaluation import TaskUnavailable, run_task
            from fastdllm_core.evaluation.runner import check_data
            from fastdllm_core.model import load_model

            for task in dict.fromkeys(t for t, *_ in todo):
                try:  # bad data (a missing field, a line that is not JSON, an empty file) fails here, before the load
                    check_data(task, p.data_paths[task])
                except TaskUnavailable:
                    pass  # becomes an n/a row per point below
            loaded = load_model(p.source, device=device, dtype=config.get("dtype", "auto"))
            for task, point, key, base_key in todo:
                cache = Path(p.cache_dir) / task
                # the point's decoder: the model's own (ar, bd, llada, dream) or Fast-dLLM v1 on a masked-diffusion
                # model; a masked-diffusion point fixes its own generation length
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
                                    limit=plan.point_limit(point) or p.limit, out_dir=cache / point,
                                    data_path=p.data_paths[task], model_label=p.label, seed=int(config["seed"]),
                                    extra=extra, device=device, code_opts={"verdict_cache": p.verdict_cache},
                                    max_new_tokens="task" if task_len and mode not in MDM_MODES else None,
                                    **({"loglikelihood_method": p.mdm_loglikelihood, "mc_num": int(p.mc_num)}
                                       if mode in MDM_MODES else {}))
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
                write_csv_atomic(cache / f"{point}.csv", rows)
                if any(r["status"] == "ok" for r in rows):  # a measurement: keyed for reuse
                    write_json_atomic(cache / f"{point}.key.json", {"key": key, "inputs": dict(base_key, point=point)})
                else:  # n/a only (missing data or extra): tried again on every run
                    (cache / f"{point}.key.json").unlink(missing_ok=True)
                rows_by_point[(task, point)] = rows
                print(f"{task} {point}: " + ", ".join(f"{r['metric']}={r['value']} ({r['status']})" for r in rows))
        out = [r for task, points in p.points.items() for point in points for r in rows_by_point[(task, point)]]
        write_csv_atomic(sm.output[0], out)
        print(f"{len(out)} rows -> {sm.output[0]}")
