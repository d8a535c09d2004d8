"""One-line summaries of what a job runs, for the DAG's dry-run messages (``snakemake -n`` prints them): the
model, tasks and decoding points of an evaluation, the runs of a throughput sweep, the models of a table."""
from __future__ import annotations

from fastdllm_core.decode_config import format_threshold
from fastdllm_dag.plan import eval_cost
from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import points as plan_points


def decode_summary(decodes: list[dict]) -> str:
    """``threshold 0.9, block 32, sub-block 8, sub-block cache on`` (values that vary joined by commas)."""
    def vals(key, fmt):
        return ",".join(dict.fromkeys(fmt(d[key]) for d in decodes))

    cache = vals("use_sub_block_cache", lambda c: "on" if c else "off")
    return (f"threshold {vals('threshold', format_threshold)}, block {vals('block_size', str)}, sub-block "
            f"{vals('sub_block_size', str)}, sub-block cache {cache}")


def sweep_summary(config: dict, sweep: str) -> str:
    """Which model runs at which batch sizes and decoding settings in a sweep (dry-run message of the bench job)."""
    by: dict[str, list] = {}
    for r in plan_points.bench_sweeps(config)[sweep]:
        by.setdefault(f"{r['model']} ({r['mode']})", []).append(r)
    out = []
    for m, runs in by.items():
        text = f"{m} batch {','.join(dict.fromkeys(str(r['batch_size']) for r in runs))}"
        if runs[0]["mode"] == "bd":
            text += " at " + decode_summary([r["decode"] for r in runs])
        out.append(text)
    return "; ".join(out)


def eval_summary(config: dict, job: dict, shards: dict | None = None) -> str:
    """Model, tasks, decoding points and generation length of an evaluation job (its dry-run message); with
    ``eval.shards``, its estimated cost and the points merged from shards (:mod:`eval_cost`; ``shards``: the run's
    ``eval_cost.shard_jobs``, computed there when None)."""
    mnt = config["decode"]["max_new_tokens"]
    length = ("each benchmark's own (lm-eval max_gen_toks / EvalPlus), recorded in every row" if mnt == "task"
              else f"{mnt} tokens on every task, recorded in every row")
    pts = sorted({p for ps in job["points"].values() for p in ps})
    return (f"model {job['model']}; tasks {', '.join(job['points'])}; {len(pts)} decoding point(s) "
            f"({', '.join(pts[:4])}{', ...' if len(pts) > 4 else ''}); generation length: {length}"
            + eval_cost.job_cost_summary(config, job, shards))


def table_rows_summary(config: dict, table: str) -> str:
    """The models of Table 1 or 2's rows, each said to be trained here or a released checkpoint (dry-run message of
    the table job); Table 2 adds whether its trained rows share the training budget."""
    models = config["models"]
    rows = [r["model"] for r in config["tables"][table]["rows"]]
    released = plan.RELEASED_TEXT if table == "table2" else "released weights"
    out = ", ".join(f"{m} ({_how(models[m], released)})" for m in rows)
    trained = [m for m in rows if plan.is_trained(models[m])]
    if table == "table2" and len(trained) > 1:
        out += ("; the trained rows share init, code and optimiser budget" if plan.share_training(config, trained) else
                "; the trained rows differ in init or optimiser budget")
    return out


def _how(m: dict, released: str) -> str:
    if m.get("train_unavailable"):  # workflow/fastdllm_dag/plan/data.py
        return "n/a rows: no training data"
    return "trained here" if plan.is_trained(m) else released


def role_summary(config: dict, *names: str) -> str:
    """``model (roles.name)`` for each role (dry-run messages of the table and figure jobs)."""
    return ", ".join(f"{plan.role(config, n)} (roles.{n})" for n in names)


def case_summary(config: dict, kind: str) -> str:
    """Every conversation with its user turns (whitespace-normalised), for the dry-run message of the job."""
    convs = plan_points.case_conversations(config, kind)
    out = [f"[{i}] " + " / ".join(f'"{" ".join(u.split())}"' for u in turns) for i, turns in enumerate(convs, 1)]
    how = (" (each later user turn follows the model's own previous answers)"
           if any(len(c) > 1 for c in convs) else "")
    return f"{len(convs)} conversation(s){how}: " + "; ".join(out)
