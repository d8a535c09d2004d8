"""A base a study built, released into <released_dir>/<study>_<base> with its manifest (fastdllm_core.release): what
built it (commit, both stages' training configs), where (machine, kernel path), its final losses and its scores, and
its files' hashes; and the base's build rows (both stages' training metrics) beside its scores.  Commit both."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    import csv
    import io

    import pandas as pd
    import yaml

    from analysis import study_cost
    from fastdllm_core.provenance import write_csv_atomic
    from fastdllm_core.release import config_digest, write_release
    from fastdllm_dag.plan import study as study_plan
    from fastdllm_dag.plan.study_specs import StudyJob

    job = StudyJob(**sm.params.job)
    base, info = sm.wildcards.base, job.meta["base"]
    keep = ("stage", "recipe", "step", "loss", "lr", "tokens_seen", "world_size", "torch_threads", "device",
            "git_commit", "cpu", "cpu_isa", "mkl_cbwr", "torch_version", "transformers_version", "python_version")
    stages, builds = {}, []
    for path in sm.input.metrics:
        text = open(path, newline="").read()
        rows = pd.read_csv(io.StringIO(text))
        last = rows.iloc[-1]
        stages[str(last["stage"])] = {k: (last[k].item() if hasattr(last[k], "item") else last[k])
                                      for k in keep if k in last}
        stages[str(last["stage"])]["train_seconds"] = round(study_cost.stage_seconds(rows), 1)
        builds += list(csv.DictReader(io.StringIO(text)))  # the rows as written
    root = sm.input.model.rsplit("/bf16", 1)[0]
    settings = {s: yaml.safe_load(open(f"{root}/{s}/run/train_config.yaml").read()) for s in study_plan.STAGES}
    acc = pd.read_csv(sm.input.accuracy)
    scores = [{"task": r.task, "metric": r.metric, "value": float(r.value), "n": int(r.n), "point": r.point}
              for r in acc[acc["status"] == "ok"].itertuples()]
    manifest = {
        "model": f"{job.study}_{base}", "label": f"AR base of the {job.study} study, base {base}",
        "built_by": f"snakemake --cores all {job.study}_study (rules {job.study}_base, {job.study}_round, "
                    f"{job.study}_release)",
        "base": base, "shape": info["shape"], "n_params": info["params"], "pretrain": info["pretrain"],
        "pretrain_tokens": info["pretrain_tokens"],
        "weights": "bfloat16 (rounded from the float32 training result; scored and adapted as released)",
        "lr_rule": "the default base's learning rates x reference width / width",
        "git_commit": stages.get("sft", {}).get("git_commit"), "settings": settings,
        "config_digest": config_digest(settings), "trained": stages, "scores": scores,
    }
    out = write_release(sm.input.model, job.meta["release"], manifest)
    write_csv_atomic(sm.output.build, builds)  # the cost table's rows (analysis/study_cost.py)
    print(f"base {base}: released to {out} ({len(scores)} scores); commit the directory")
