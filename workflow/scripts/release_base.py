"""Write the released checkpoints this run built (build_released) into their source directories with a manifest
(fastdllm_core.release): what built them (commit, every stage's training config, the synthetic data settings and
their digests), the machine and kernel path of the training, the final losses and the scores."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    import json
    from pathlib import Path

    import pandas as pd

    from fastdllm_core.provenance import write_text_atomic
    from fastdllm_core.release import config_digest, numerics_digest, write_release
    from fastdllm_dag.plan import models as plan
    from fastdllm_dag.plan import released

    cfg = sm.config
    acc = pd.concat([pd.read_csv(f) for f in sm.input.accuracy], ignore_index=True)
    metrics = {Path(f).parent.name: f for f in sm.input.metrics}  # the stage's training curve, by stage name
    written = {}
    for name in sm.params.builds:
        chain = released.build_chain(cfg, name)
        settings = released.build_settings(cfg, name)
        cases = released.numerics_cases(cfg, name)
        stages = {}
        for stage in chain:
            last = pd.read_csv(metrics[stage]).iloc[-1]
            stages[stage] = {k: (last[k].item() if hasattr(last[k], "item") else last[k])
                             for k in ("recipe", "step", "loss", "tokens_seen", "world_size", "torch_threads",
                                       "git_commit", "cpu", "cpu_isa", "mkl_cbwr", "torch_version",
                                       "transformers_version", "python_version") if k in last}
        mine = acc[(acc["model"] == name) & (acc["status"] == "ok")]
        scores = [{"task": r.task, "metric": r.metric, "value": float(r.value), "n": int(r.n), "point": r.point}
                  for r in mine.itertuples()]
        manifest = {
            "model": name, "label": cfg["models"][name].get("label", name),
            "built_by": "snakemake --cores all release_base --config build_released=True",
            "git_commit": stages[chain[-1]].get("git_commit"), "chain": chain, "settings": settings,
            "config_digest": config_digest(settings), "numerics_cases": cases,
            "numerics_digest": numerics_digest(sm.input.numerics, cases), "trained": stages, "scores": scores,
        }
        out = plan.shared_path(cfg, cfg["models"][name]["source"])
        write_release(plan.model_final(cfg, name), out, manifest)
        written[name] = out
        print(f"{name}: released to {out} (chain {' -> '.join(chain)}; {len(scores)} scores); commit the directory")
    write_text_atomic(sm.output[0], json.dumps(written, indent=1) + "\n")
