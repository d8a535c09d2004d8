"""A base a study built, released into <released_dir>/<study>_<base> with its manifest (fastdllm_core.release): what
built it (commit, both stages' training configs), where (machine, kernel path), its final losses and its scores, and
its files' hashes.  Commit the directory afterwards."""
from fastdllm_dag.job.log import logged

with logged(snakemake):  # noqa: F821
    import pandas as pd
    import yaml

    from fastdllm_core.release import config_digest, write_release
    from fastdllm_dag.plan import study as study_plan
    from fastdllm_dag.plan.study_specs import StudyJob

    sm = snakemake  # noqa: F821
    job = StudyJob(**sm.params.job)
    base, info = sm.wildcards.base, job.meta["base"]
    keep = ("stage", "recipe", "step", "loss", "lr", "tokens_seen", "world_size", "torch_threads", "device",
            "git_commit", "cpu", "cpu_isa", "mkl_cbwr", "torch_version", "transformers_version", "python_version")
    stages = {}
    for path in sm.input.metrics:
        last = pd.read_csv(path).iloc[-1]
        stages[str(last["stage"])] = {k: (last[k].item() if hasattr(last[k], "item") else last[k])
                                      for k in keep if k in last}
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
    print(f"base {base}: released to {out} ({len(scores)} scores); commit the directory")
