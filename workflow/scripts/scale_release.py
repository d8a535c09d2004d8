"""A base the scale study built, released into scale_study.released_dir/scale_<size> with its manifest
(fastdllm_core.release): what built it (commit, both stages' training configs), where (machine, kernel path), its
final losses and its scores, and its files' hashes.  Commit the directory afterwards."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import pandas as pd
    import yaml

    import plan_scale
    from fastdllm_core.release import config_digest, write_release

    sm = snakemake  # noqa: F821
    config, size = sm.config, sm.wildcards.size
    stages = {}
    for path in sm.input.metrics:
        last = pd.read_csv(path).iloc[-1]
        keep = ("stage", "recipe", "step", "loss", "lr", "tokens_seen", "world_size", "torch_threads", "device",
                "git_commit", "cpu", "cpu_isa", "mkl_cbwr", "torch_version", "transformers_version", "python_version")
        stages[str(last["stage"])] = {k: (last[k].item() if hasattr(last[k], "item") else last[k])
                                      for k in keep if k in last}
    settings = {}
    for stage in plan_scale.STAGES:
        text = open(f"{sm.input.model.rsplit('/bf16', 1)[0]}/{stage}/run/train_config.yaml").read()
        settings[stage] = yaml.safe_load(text)
    acc = pd.read_csv(sm.input.accuracy)
    ok = acc[acc["status"] == "ok"]
    scores = [{"task": r.task, "metric": r.metric, "value": float(r.value), "n": int(r.n), "point": r.point}
              for r in ok.itertuples()]
    manifest = {
        "model": f"scale_{size}", "label": f"AR base of the scale study, size {size}",
        "built_by": "snakemake --cores all scale_study (rules scale_base, scale_round, scale_release)",
        "size": size, "shape": plan_scale.sizes(config)[size], "n_params": plan_scale.params_of(config)[size],
        "weights": "bfloat16 (rounded from the float32 training result; scored and adapted as released)",
        "lr_rule": "the default base's learning rates x reference width / width",
        "git_commit": stages.get("sft", {}).get("git_commit"), "settings": settings,
        "config_digest": config_digest(settings), "trained": stages, "scores": scores,
    }
    out = write_release(sm.input.model, sm.params.out, manifest)
    print(f"base {size}: released to {out} ({len(scores)} scores); commit the directory")
