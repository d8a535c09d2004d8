"""Stand-in checkpoints and benchmark files of a rehearsal (rules standin_model / standin_data)."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from fastdllm_core import rehearsal

    spec = dict(sm.params.spec)
    if sm.rule == "standin_models":
        for name, path in sm.output.items():
            s = spec[name]
            rehearsal.write_standin_model(path, s["format"], seed=int(s.get("seed", 0)))
            print(f"{name}: {s['format']} stand-in (random weights, seed {s.get('seed', 0)}) -> {path}")
    else:
        files = rehearsal.write_standin_data(sm.output[0], n_items=int(spec.get("n_items", 8)),
                                             seed=int(spec.get("seed", 0)), tasks=spec.get("tasks"))
        for task, path in files.items():
            print(f"{task}: {path}")
