"""What each study job receives (workflow/rules/studies.smk): one :class:`StudyJob`, built at parse time from the
study's plan (:class:`study_rows.Study`) and passed as the rule's ``job`` parameter (a dict: Snakemake hands it to
the job, which reads it back with ``StudyJob(**snakemake.params.job)``)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import points as plan_points
from fastdllm_dag.plan import study as sp
from fastdllm_dag.plan import study_rows

# the description (``snakemake --list-rules``) of a study's target, ``{name}`` and ``{out}`` filled per study
RULE_DOCS = {
    "study": (
        "The {name} study's table and figure ({out}/): each point's gaps to its base and to NTP, tokens per "
        "forward and batch-1 speed, with fits; and the bases this run built, released (commit them and the rows)."
    ),
}


@dataclass(frozen=True)
class StudyJob:
    """One job of a study: the point it makes (a snapshot, or ``base.<base>``) and what it needs.

    ``mode`` and ``label``: how its rows name the model; ``group``: their ``model_group``; ``fields``: what every
    row carries (:func:`study_plan.row_fields`); ``source``: the checkpoint it trains from (training) or scores;
    ``ar_key``/``ar_source``: the base it is timed against; ``run_dir``, ``train`` and ``steps``: a training run;
    ``data_paths``, ``cache_dir`` and ``verdict_cache``: scoring; ``meta``: anything else the step names."""
    study: str
    point: str
    mode: str = "ar"
    label: str = ""
    group: str = ""
    fields: dict = field(default_factory=dict)
    source: str = ""
    ar_key: str = ""
    ar_source: str = ""
    run_dir: str = ""
    train: dict = field(default_factory=dict)
    steps: int = 0
    data_paths: dict = field(default_factory=dict)
    cache_dir: str = ""
    verdict_cache: str = ""
    meta: dict = field(default_factory=dict)


def _scoring(config: dict, st: study_rows.Study, point: str, run_dir: str) -> dict:
    return dict(data_paths={t: plan.task_data(config, t) for t in plan.SYNTH_TASKS},
                cache_dir=f"{st.work}/points/{point}", verdict_cache=f"{run_dir}/cache/verdicts")


def snapshot_job(config: dict, st: study_rows.Study, snapshot: str, run_dir: str) -> dict:
    """The job of a snapshot (training, scoring and timing read the parts they need)."""
    snap, chain = st.snapshots[snapshot], st.chain_of(snapshot)
    base = chain["base"]
    source = study_rows.base_source(config, st, base)
    label = config["models"][chain["model"]].get("label", chain["model"])
    where = f" {base}" if len(st.bases) > 1 else ""
    job = StudyJob(
        study=st.name, point=snapshot, mode=config["models"][chain["model"]]["mode"],
        label=f"{label}{where} at {snap['budget']}x", group=chain["model"],
        fields=sp.row_fields(config, st.name, snapshot, snap, chain), source=f"{st.work}/models/{snapshot}",
        ar_key=f"base{sp.SEP}{base}", ar_source=source, run_dir=f"{st.work}/runs/{snap['chain']}",
        train=sp.train_config(config, st.name, chain, [f"{st.work}/data/adapt.jsonl"], source),
        steps=int(snap["steps"]), meta=dict(chain=chain, snapshot=snap), **_scoring(config, st, snapshot, run_dir))
    return asdict(job)


def base_job(config: dict, st: study_rows.Study, base: str, run_dir: str) -> dict:
    """The job of a base's scores and release."""
    b = st.bases[base]
    fields = sp.base_row_fields(config, st.name, base)
    job = StudyJob(study=st.name, point=fields["snapshot"], mode="ar", group="base", fields=fields,
                   label=f"AR base {base} ({b['params'] / 1e6:.2f}M, pretraining {b['pretrain']}x)",
                   source=study_rows.base_source(config, st, base), **_scoring(config, st, fields["snapshot"], run_dir),
                   meta=dict(base=b, release=study_rows.release_dir(config, st.name, base)))
    return asdict(job)


def stage_job(config: dict, st: study_rows.Study, base: str, stage: str, inputs, run_dir: str) -> dict:
    """The job of one training stage of a built base."""
    init = inputs.init[0] if inputs.init else "tiny"
    train = sp.base_train_config(config, st.name, base, stage, [inputs.data], init)
    job = StudyJob(study=st.name, point=f"{base}.{stage}", group="base", train=train,
                   run_dir=f"{st.work}/bases/{base}/{stage}/run", label=f"{st.name}_{base}_{stage}",
                   meta=dict(base=base, stage=stage, shape=st.bases[base]["shape"],
                             recipe=sp.stage_train(config, st.name, stage)["recipe"]))
    return asdict(job)


def report_job(config: dict, st: study_rows.Study, accuracy_files: list[str]) -> dict:
    """What the report reads beside the rows: the axis, the columns and points, labels and what is missing."""
    have = {f.rsplit("/", 1)[-1].rsplit(".accuracy.csv", 1)[0] for f in accuracy_files}
    return dict(name=st.name, x=st.spec.get("x", "adapt"), title=f"{st.name.capitalize()} study ({config['scale']})",
                describe=sp.describe(config, st.name), missing=[s for s in st.snapshots if s not in have],
                columns=sp.report_columns(config, st.name),
                points={"accuracy": plan_points.point_name("bd", plan_points.base_decode(config)),
                        "speed": plan_points.point_name("bd", plan_points.speed_decode(config))},
                labels={m: config["models"][m].get("label", m) for m in st.spec["models"]},
                pretrain_tokens=sp.pretrain_tokens(config, st.name), threshold=float(config["speed_threshold"]))
