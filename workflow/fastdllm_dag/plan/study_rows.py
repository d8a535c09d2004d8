"""What a study has on disk, read at parse time: the one place a study's plan reads files.

Every study keeps its rows as they are made, under ``<results_dir>/<name>_study/points`` (committed: a point made
once, on any machine, is read by every later report; delete its files to remake it), and its built bases'
releases under ``<released_dir>/<name>_<base>``.  A run makes the snapshots of its subsets (``run_bases``,
``run_budgets``, ``run_seeds``) whose files are missing, and builds the bases those need that are not released.
:class:`Study` holds the whole plan of one study for the rules (workflow/rules/studies.smk).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field

from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import study as sp


def points_dir(config: dict, name: str) -> str:
    return f"{config['results_dir']}/{name}_study/points"


def point_files(config: dict, name: str, point: str) -> dict[str, str]:
    """A snapshot's three files (accuracy, speed, training rows); a base's (``base.<base>``) accuracy only."""
    d = points_dir(config, name)
    if point.startswith("base" + sp.SEP):
        return {"accuracy": f"{d}/{point}.accuracy.csv"}
    return {k: f"{d}/{point}.{k}.csv" for k in ("accuracy", "speed", "metrics")}


def is_done(config: dict, name: str, point: str) -> bool:
    return all(os.path.isfile(f) for f in point_files(config, name, point).values())


def run_subset(config: dict, name: str, key: str) -> set | None:
    """``run_bases`` (names), ``run_budgets`` or ``run_seeds`` (integers; ``--config`` passes strings); None when
    unset (all)."""
    chosen = sp.spec(config, name).get(key)
    if chosen is None:
        return None
    return set(chosen) if key == "run_bases" else {int(v) for v in chosen}


def build_file(config: dict, name: str, base: str) -> str:
    """A built base's build rows: both stages' training metrics, written with its release."""
    return f"{points_dir(config, name)}/base{sp.SEP}{base}.build.csv"


def released_pattern(config: dict, name: str) -> str:
    """Where the bases study ``name`` builds are released, ``{base}`` unfilled: ``<released_dir>/<name>_{base}``."""
    return f"{sp.spec(config, name)['released_dir']}/{name}_{{base}}"


def release_dir(config: dict, name: str, base: str) -> str:
    """Where ``base`` is released: the default's own base for the reference, else :func:`released_pattern`'s."""
    if sp.bases(config, name)[base]["reference"]:
        return plan.model_source(config, "ar_base")
    return released_pattern(config, name).format(base=base)


@dataclass
class Study:
    """One study's plan: its bases, chains and snapshots, what this run makes (``todo``, ``todo_bases``,
    ``built``), and where its files go (``work``: this scale's intermediate files; ``out``: the report;
    ``points``: the committed rows)."""
    name: str
    spec: dict
    bases: dict
    chains: dict
    snapshots: dict
    work: str
    out: str
    points: str
    todo: dict = field(default_factory=dict)
    todo_bases: list = field(default_factory=list)
    built: list = field(default_factory=list)

    @property
    def plan_file(self) -> str:
        """This run's plan, named by what it makes: a run that would make something else is checked anew."""
        text = json.dumps({"todo": self.todo, "built": self.built}, sort_keys=True)
        return f"{self.work}/plans/{hashlib.sha256(text.encode()).hexdigest()[:12]}.json"

    def chain_of(self, snapshot: str) -> dict:
        return self.chains[self.snapshots[snapshot]["chain"]]


def load(config: dict, name: str) -> Study:
    """Study ``name`` as this run sees it: :mod:`study_plan`'s grid and the files already made."""
    bases, chains = sp.bases(config, name), sp.chains(config, name)
    snaps = sp.snapshots(config, name, chains)
    st = Study(name=name, spec=sp.spec(config, name), bases=bases, chains=chains, snapshots=snaps,
               work=f"{plan.run_dir(config)}/{name}_study", out=f"{config['results_dir']}/{name}_study",
               points=points_dir(config, name))
    mine = run_subset(config, name, "run_bases")
    budgets, seeds = run_subset(config, name, "run_budgets"), run_subset(config, name, "run_seeds")
    mine = set(bases) if mine is None else mine
    st.todo = {k: v for k, v in snaps.items()
               if chains[v["chain"]]["base"] in mine and (budgets is None or v["budget"] in budgets)
               and (seeds is None or chains[v["chain"]]["seed"] in seeds) and not is_done(config, name, k)}
    st.todo_bases = [b for b in bases if b in mine and not is_done(config, name, f"base{sp.SEP}{b}")]
    need = set(st.todo_bases) | {chains[v["chain"]]["base"] for v in st.todo.values()}
    rebuild = bool(config.get("build_released"))
    st.built = [b for b, v in bases.items() if not v["reference"] and b in need
                and (rebuild or not os.path.isfile(os.path.join(release_dir(config, name, b), "manifest.json")))]
    return st


def base_source(config: dict, st: Study, base: str) -> str:
    """The base every job of ``base`` reads: the released one, or its bf16 copy when this run builds it."""
    return f"{st.work}/bases/{base}/bf16" if base in st.built else release_dir(config, st.name, base)


def existing_points(config: dict, st: Study, kind: str) -> list[str]:
    """Every planned snapshot's ``kind`` file that exists or that this run makes."""
    made = {point_files(config, st.name, s)[kind] for s in st.todo}
    files = [point_files(config, st.name, s)[kind] for s in st.snapshots]
    return [f for f in files if f in made or os.path.exists(f)]


def existing_bases(config: dict, st: Study) -> list[str]:
    files = {b: point_files(config, st.name, f"base{sp.SEP}{b}")["accuracy"] for b in st.bases}
    return [f for b, f in files.items() if b in st.todo_bases or os.path.exists(f)]


def existing_builds(config: dict, st: Study) -> list[str]:
    """The build rows of every base this run builds, and of those built before that have them."""
    files = {b: build_file(config, st.name, b) for b in st.bases}
    return [f for b, f in files.items() if b in st.built or os.path.exists(f)]


def check_ceiling(config: dict, st: Study) -> dict[str, float]:
    """:func:`study_plan.estimate_hours` of what this run makes, or a named error over ``ceiling_hours`` (the
    study's plan job, before any training)."""
    est = sp.estimate_hours(config, st.name, st.built, st.todo)
    if est["wall"] > float(st.spec["ceiling_hours"]):
        raise ValueError(f"studies.{st.name}: what this run would make is estimated at {est['wall']:.1f} h on "
                         f"{st.spec.get('cores', 1)} cores (bases {est['bases']:.1f} h, chains {est['chains']:.1f} h "
                         f"of one job), over studies.{st.name}.ceiling_hours={st.spec['ceiling_hours']:g}; choose "
                         "what to run with run_bases, run_budgets and run_seeds, run the largest on a GPU, or raise "
                         "the ceiling")
    return est
