"""One snapshot of the budget study (or of the scale study, rule scale_train): the chain's run trained to this
budget's steps (resuming from the previous snapshot's checkpoint in the same run directory), its final checkpoint
copied out as the snapshot, and its training rows (with the chain, budget, tokens and passes over the set) beside
it."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import json
    import shutil
    from pathlib import Path

    import yaml

    import jobs
    from fastdllm_core.provenance import write_csv_atomic, write_text_atomic
    from fastdllm_core.training.checkpoints import read_metrics
    from fastdllm_core.training.config import TrainConfig
    from fastdllm_core.training.loop import train

    sm = snakemake  # noqa: F821
    snap, chain = sm.params.snapshot, sm.params.chain
    jobs.require_device(sm.config)
    config = TrainConfig.from_dict(sm.params.cfg)  # a bad key or value named before anything is written
    run_dir = Path(sm.params.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(run_dir / "train_config.yaml", yaml.safe_dump(sm.params.cfg, sort_keys=False))
    # a changed setting of the chain trains from step 0; a rerun of an earlier budget (its later snapshots are
    # rerun after it) goes on from no later step than its own
    jobs.start_over_if_changed(run_dir, config.with_max_steps(int(snap["steps"])), sm.wildcards.snapshot)
    print(f"{sm.wildcards.snapshot}: {chain['model']} seed {chain['seed']} lever {chain['lever']}, budget "
          f"{snap['budget']}x = {snap['steps']} steps ({snap['tokens']} tokens)")
    final = train(config, run_dir, max_steps=int(snap["steps"]), progress=True)
    out = Path(sm.output.model)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(final, tmp)
    tmp.rename(out)
    store = json.loads((run_dir / "data" / "meta.json").read_text())
    set_tokens = int(store["sequences"]) * int(store["seq_len"])
    rows = read_metrics(run_dir / "metrics.csv", int(snap["steps"]))
    if not rows:
        raise RuntimeError(f"{run_dir / 'metrics.csv'} has no rows up to step {snap['steps']}")
    lever = chain["lever"] or {}
    # the study's own row fields when it gives them (the scale study: size and parameters), else the budget study's
    extra = dict(getattr(sm.params, "fields", None) or {
        "snapshot": sm.wildcards.snapshot, "chain": snap["chain"], "model_group": chain["model"],
        "train_seed": chain["seed"], "lever": lever.get("name", ""), "lever_value": lever.get("value", ""),
        "budget": snap["budget"], "budget_tokens": snap["tokens"]}, set_tokens=set_tokens,
        set_examples=store["examples"])
    rows = [dict(extra, passes=round(int(r["tokens_seen"]) / set_tokens, 4), **r) for r in rows]
    write_csv_atomic(sm.output.metrics, rows)
    print(f"snapshot {out}; {rows[-1]['tokens_seen']} tokens seen, {rows[-1]['passes']} passes over "
          f"{set_tokens} tokens; final loss {rows[-1]['loss']}")
