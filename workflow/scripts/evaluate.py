"""Accuracy of one model on one task at several decoding points, through fastdllm_core.evaluation.run_task
(model loaded once).  A task that cannot load its data offline becomes one ``status = n/a`` row with the reason
(never a number).  Each point's rows are cached under ``<model>/<task>/<point>.csv`` with a key covering the
model checkpoint, data file, evaluation settings and fastdllm_core's code; a point whose key matches is reused."""
import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _log import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import csv
    import json
    from pathlib import Path

    import dagconfig as dc
    from fastdllm_core.decoding import DecodeConfig
    from fastdllm_core.provenance import config_hash, run_metadata, write_csv_atomic, write_json_atomic

    sm = snakemake  # noqa: F821
    wc, p, config = sm.wildcards, sm.params, sm.config
    device = dc.require_device(config)
    cache = Path(p.cache_dir)
    base_key = {"source": p.source, "model_files": dc.fingerprint_files(sm.input.model),
                "data": dc.fingerprint_files([p.data_path] if p.data_path else []), "task": wc.task,
                "mode": p.mode, "max_new_tokens": p.max_new_tokens, "batch_size": p.batch_size, "limit": p.limit,
                "seed": config["seed"], "device": device, "dtype": config.get("dtype", "auto"),
                "code": dc.code_fingerprint()}
    todo, rows_by_point = [], {}
    for point in p.points:
        key = config_hash(dict(base_key, point=point))
        kf, cf = cache / f"{point}.key.json", cache / f"{point}.csv"
        if kf.is_file() and cf.is_file() and json.loads(kf.read_text()).get("key") == key:
            with open(cf, newline="") as fh:
                rows_by_point[point] = list(csv.DictReader(fh))
            print(f"{point}: reused (same model, data, settings and code)")
        else:
            todo.append((point, key))
    if todo:
        from fastdllm_core.evaluation import TaskUnavailable, run_task
        from fastdllm_core.model import load_model

        loaded = load_model(p.source, device=device, dtype=config.get("dtype", "auto"))
        for point, key in todo:
            dec = dc.parse_point(point)
            decode = DecodeConfig(**(dec or {}), max_new_tokens=int(p.max_new_tokens)).validate()
            extra = {"model_key": wc.model, "scale": config["scale"], "point": point}
            try:
                rows = run_task(loaded, wc.task, mode=p.mode, decode=decode, batch_size=int(p.batch_size),
                                limit=p.limit, out_dir=cache / point, data_path=p.data_path, model_label=p.label,
                                seed=int(config["seed"]), extra=extra, device=device)
            except TaskUnavailable as exc:
                print(f"{point}: task unavailable: {exc.reason}")
                rows = [{"model": p.source, "model_label": p.label, "task": wc.task, "metric": "", "value": "",
                         "n": 0, "status": "n/a", "note": exc.reason, "mode": p.mode, **(dec or {}), **extra,
                         **run_metadata({"task": wc.task, "point": point}, seed=config["seed"], device=device)}]
            for r in rows:  # the DAG's model key in `model`; the loaded source kept beside it
                r["model_source"] = r["model"]
                r["model"] = wc.model
            write_csv_atomic(cache / f"{point}.csv", rows)
            write_json_atomic(cache / f"{point}.key.json", {"key": key, "inputs": dict(base_key, point=point)})
            rows_by_point[point] = rows
            print(f"{point}: " + ", ".join(f"{r['metric']}={r['value']} ({r['status']})" for r in rows))
    out = [r for point in p.points for r in rows_by_point[point]]
    write_csv_atomic(sm.output[0], out)
    print(f"{len(out)} rows -> {sm.output[0]}")
