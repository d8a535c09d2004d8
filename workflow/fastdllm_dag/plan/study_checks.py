"""A study's config checked before any job (``studies.<name>``, :mod:`study_plan`): named errors for a bad shape, a
first size that is not the default base's, sizes or pretraining multiples out of order, an unknown lever or a bad
value of one, a model the study cannot train, a non-constant schedule, a missing rate, an unknown run subset.  The
estimate against ``ceiling_hours`` is checked by the study's plan job (:func:`study_rows.check_ceiling`)."""
from __future__ import annotations

from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import study as sp


def check(config: dict) -> None:
    for name in sp.names(config):
        where = f"studies.{name}"
        s = sp.spec(config, name)
        if s.get("x", "adapt") not in sp.X_AXES:
            raise ValueError(f"{where}.x: unknown axis {s.get('x')!r}; known: {list(sp.X_AXES)}")
        _check_shapes(config, name, where)
        _check_models(config, name, where)
        _check_levers(config, name, where)
        _check_subsets(config, name, where)


def _check_shapes(config: dict, name: str, where: str) -> None:
    given = sp.spec(config, name).get("sizes") or []
    keys = [v.get("name") for v in given]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{where}.sizes: names must be unique, got {keys}")
    for shape in given:
        missing = [k for k in sp.SHAPE_KEYS if k not in shape]
        if missing:
            raise ValueError(f"{where}.sizes.{shape.get('name')}: missing {missing} (a size is {list(sp.SHAPE_KEYS)})")
        h, heads, kv = int(shape["hidden_size"]), int(shape["heads"]), int(shape["kv_heads"])
        if heads <= 0 or h % heads:
            raise ValueError(f"{where}.sizes.{shape['name']}: heads={heads} does not divide hidden_size={h}")
        if kv <= 0 or heads % kv:
            raise ValueError(f"{where}.sizes.{shape['name']}: kv_heads={kv} does not divide heads={heads}")
    shapes = sp.sizes(config, name)
    first = next(iter(shapes))
    if shapes[first] != sp.default_shape(config, name):
        raise ValueError(f"{where}.sizes: the first size ({first}: {shapes[first]}) must be the default base's shape "
                         f"{sp.default_shape(config, name)} (models.ar_pretrained.train.model.tiny): the study starts "
                         "from the default's released base")
    params = {k: sp.n_params(v, sp.vocab_rows(config)) for k, v in shapes.items()}
    order = list(params.values())
    if order != sorted(order) or len(set(order)) != len(order):
        raise ValueError(f"{where}.sizes: sizes must grow in parameters, in order; got {params}")
    mults = [int(m) for m in sp.spec(config, name).get("pretrain") or [1]]
    if mults[0] != 1 or mults != sorted(set(mults)):
        raise ValueError(f"{where}.pretrain: multiples of the default base's pretraining must start at 1 (the "
                         f"released base) and grow, got {mults}")


def _check_models(config: dict, name: str, where: str) -> None:
    s, models = sp.spec(config, name), config["models"]
    for m in s["models"]:
        if m not in models or not plan.is_adaptation(models[m]):
            raise ValueError(f"{where}.models: {m!r} is not a model adapted here; adapted: "
                             f"{[n for n, v in models.items() if plan.is_adaptation(v)]}")
        if m not in s["train_rate"]:
            raise ValueError(f"{where}.train_rate: no rate for {m!r} (tokens/s of one job at the default size)")
        sched = plan.training_config(config, m, [])["optim"].get("schedule", "constant")
        if sched != "constant":
            raise ValueError(f"{where}: {m!r} trains with schedule {sched!r}; a snapshot equals the shorter run only "
                             "under a constant learning rate after the warm-up (training.optim.schedule)")
    if len(sp.bases(config, name)) > 1 and "base" not in s["train_rate"]:
        raise ValueError(f"{where}.train_rate: no rate for 'base' (tokens/s of the base's training at the default "
                         "size): this study builds bases")
    if len(sp.bases(config, name)) > 1 and not s.get("released_dir"):
        raise ValueError(f"{where}.released_dir: this study builds bases and must say where they are released")


def _check_levers(config: dict, name: str, where: str) -> None:
    from fastdllm_core.training.config import TrainConfig

    for lever in sp.spec(config, name).get("levers") or []:
        if lever.get("name") not in sp.LEVERS:
            raise ValueError(f"{where}.levers: unknown lever {lever.get('name')!r}; known: {sorted(sp.LEVERS)}")
    for cname, c in sp.chains(config, name).items():
        try:  # a lever's value (an lr that is not a number, an unknown mask_init) named here, not in the job
            TrainConfig.from_dict(sp.train_config(config, name, c, ["<the study's set>"], "<base>"),
                                  check_files=False)
        except ValueError as exc:
            raise ValueError(f"{where}: chain {cname} (lever {c['lever']}): {exc}") from exc


def _check_subsets(config: dict, name: str, where: str) -> None:
    s, bases = sp.spec(config, name), list(sp.bases(config, name))
    for field in ("run_bases", "base_budgets"):  # a list of bases; a mapping base -> budgets
        for key in s.get(field) or ():
            if key not in bases:
                raise ValueError(f"{where}.{field}: unknown base {key!r}; known: {bases}")
    budgets = {int(b) for b in s["budgets"]} | {int(b) for v in (s.get("base_budgets") or {}).values() for b in v}
    known = {"run_budgets": sorted(budgets),
             "run_seeds": sorted({int(v) for v in list(s["seeds"]) + list(s.get("endpoint_seeds") or [])})}
    for key, values in known.items():
        for v in s.get(key) or []:
            if not str(v).isdigit() or int(v) not in values:
                raise ValueError(f"{where}.{key}: unknown value {v!r}; the study's: {values}")
