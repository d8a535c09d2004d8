"""One snapshot of a study: its chain's run trained to this budget's steps (resuming from the previous snapshot's
checkpoint in the same run directory), its final checkpoint copied out as the snapshot, and its training rows (with
the snapshot's fields and the passes over the set) written to the study's points."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    import json
    import shutil
    from pathlib import Path

    from fastdllm_core.provenance import write_csv_atomic
    from fastdllm_core.training.checkpoints import read_metrics
    from fastdllm_core.training.config import TrainConfig
    from fastdllm_core.training.loop import train
    from fastdllm_dag.job import common as jobs
    from fastdllm_dag.plan.study_specs import StudyJob

    job = StudyJob(**sm.params.job)
    jobs.require_device(sm.config)
    config = TrainConfig.from_dict(job.train)  # a bad key or value named before anything is written
    # a changed setting of the chain trains from step 0; a rerun of an earlier budget (its later snapshots are
    # rerun after it) goes on from no later step than its own
    run_dir = jobs.start_run(job.run_dir, job.train, config.with_max_steps(job.steps), job.point)
    chain = job.meta["chain"]
    print(f"{job.point}: {chain['model']} seed {chain['seed']} lever {chain['lever']}, base {chain['base']}, budget "
          f"{job.fields['budget']}x = {job.steps} steps ({job.fields['budget_tokens']} tokens)")
    final = train(config, run_dir, max_steps=job.steps, progress=True)
    out = Path(sm.output.model)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(final, tmp)
    tmp.rename(out)
    store = json.loads((run_dir / "data" / "meta.json").read_text())
    set_tokens = int(store["sequences"]) * int(store["seq_len"])
    rows = read_metrics(run_dir / "metrics.csv", job.steps)
    if not rows:
        raise RuntimeError(f"{run_dir / 'metrics.csv'} has no rows up to step {job.steps}")
    extra = dict(job.fields, set_tokens=set_tokens, set_examples=store["examples"])
    rows = [dict(extra, passes=round(int(r["tokens_seen"]) / set_tokens, 4), **r) for r in rows]
    write_csv_atomic(sm.output.metrics, rows)
    print(f"snapshot {out}; {rows[-1]['tokens_seen']} tokens seen, {rows[-1]['passes']} passes over "
          f"{set_tokens} tokens; final loss {rows[-1]['loss']}")
