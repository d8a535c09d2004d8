"""What a Table 1 difference pair is: each row's ``baseline`` with its ``relation`` (and ``relation_note``), checked
where the config can show it, and the label the tables and the summary page print for it.

Relations (``tables.table1.rows[i].relation``; default ``adapted_from``):

* ``adapted_from``: the row's model was adapted (trained) from the baseline; for a model trained here the baseline
  must be in its ``train.init`` chain;
* ``same_base_data_budget``: both trained here from the same init, on the same dataset, with the same resolved
  training budget (``optim``): only then does a difference isolate the recipe;
* ``same_base``: both descend from the same pretrained model by different adaptation / post-training;
* ``same_family``: a later release of the same model family (e.g. one further trained from the other);
* ``same_size``: only the parameter scale is shared.

The last three cannot be read off the config: they need a ``relation_note`` stating the fact (and its source).
"""
from __future__ import annotations

from fastdllm_dag.plan import models as plan

RELATIONS = {
    "adapted_from": "the row against the {kind} model it was adapted from",
    "same_base_data_budget": "two {kind} recipes, same base, data and budget",
    "same_base": "two models from the same pretrained base, different adaptation",
    "same_family": "two models of the same family",
    "same_size": "two models of the same size, different lineage",
}
NEEDS_NOTE = ("same_base", "same_family", "same_size")
DEFAULT_RELATION = "adapted_from"


class PairError(ValueError):
    """A pair whose relation the config contradicts; ``field`` names the config key."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def init_chain(config: dict, name: str) -> list[str]:
    """The models (or paths) model ``name`` was trained from, nearest first (empty when it is not trained here)."""
    models, chain, cur = config["models"], [], name
    while cur in models and plan.is_trained(models[cur]):
        cur = models[cur]["train"]["init"]
        chain.append(cur)
    return chain


def same_base_data_budget(config: dict, a: str, b: str) -> str | None:
    """None when models ``a`` and ``b`` are both trained here from the same init, on the same dataset, with the
    same resolved ``optim`` (plan.training_config); otherwise why not."""
    models = config["models"]
    for m in (a, b):
        if not plan.is_trained(models[m]):
            return f"{m!r} is not trained here (a released checkpoint or an untrained source)"
    ta, tb = models[a]["train"], models[b]["train"]
    if ta["init"] != tb["init"]:
        return f"different inits ({ta['init']!r}, {tb['init']!r})"
    if ta.get("dataset", "adapt") != tb.get("dataset", "adapt"):
        return f"different datasets ({ta.get('dataset', 'adapt')!r}, {tb.get('dataset', 'adapt')!r})"
    oa, ob = (plan.training_config(config, m, [])["optim"] for m in (a, b))
    if oa != ob:
        diff = sorted(k for k in set(oa) | set(ob) if oa.get(k) != ob.get(k))
        return f"different training budgets (optim {', '.join(diff)})"
    return None


def check_pair(config: dict, i: int, row: dict) -> None:
    """Row ``i`` of Table 1: its baseline is another row, its relation is one the config does not contradict."""
    models, rows = config["models"], config["tables"]["table1"]["rows"]
    b, rel = row["baseline"], row.get("relation", DEFAULT_RELATION)
    field = f"tables.table1.rows[{i}]"
    in_table = [r["model"] for r in rows]
    if b not in in_table or b == row["model"]:
        raise PairError(f"{field}.baseline", f"{b!r} must be another row of tables.table1 ({', '.join(in_table)})")
    if rel not in RELATIONS:
        raise PairError(f"{field}.relation", f"{rel!r} is not one of {', '.join(RELATIONS)}")
    if rel in NEEDS_NOTE and not str(row.get("relation_note", "")).strip():
        raise PairError(f"{field}.relation_note", f"relation {rel} cannot be checked from the config: state the "
                                                  "fact it rests on (and its source) in relation_note")
    chain = init_chain(config, row["model"])
    if rel == "adapted_from" and chain and b not in chain and models[b].get("source") not in chain:
        raise PairError(f"{field}.baseline", f"{row['model']!r} is trained here from {' -> '.join(chain)}, not "
                                             f"from {b!r}: difference it against the model it was adapted from "
                                             "(or give the pair's true relation)")
    if rel == "same_base_data_budget":
        why = same_base_data_budget(config, row["model"], b)
        if why:
            raise PairError(f"{field}.relation", f"same_base_data_budget does not hold for {row['model']!r} and "
                                                 f"{b!r}: {why}")


def pair_label(config: dict, row: dict) -> str:
    """What the difference of ``row`` against its baseline is, e.g. "the row against the AR model it was adapted
    from", followed by the row's ``relation_note``."""
    rel = row.get("relation", DEFAULT_RELATION)
    text = RELATIONS[rel].format(kind="AR" if config["models"][row["baseline"]]["mode"] == "ar" else "diffusion")
    note = str(row.get("relation_note", "")).strip()
    return f"{text} ({note})" if note else text


def table1_pairs(config: dict) -> list[dict]:
    """Table 1's pairs: each row with a baseline (its stated relation), then every two diffusion rows not yet
    paired that are checkably trained from the same base with the same data and budget; other diffusion rows are
    not paired (a difference between unrelated models would isolate nothing)."""
    rows = config["tables"]["table1"]["rows"]
    out = [{"a": r["baseline"], "b": r["model"], "why": "Table 1: " + pair_label(config, r)}
           for r in rows if r.get("baseline")]
    diffusion = [r["model"] for r in rows if config["models"][r["model"]]["mode"] != "ar"]
    seen = {frozenset((p["a"], p["b"])) for p in out}
    for i, a in enumerate(diffusion):
        for b in diffusion[i + 1:]:
            if frozenset((a, b)) not in seen and same_base_data_budget(config, a, b) is None:
                out.append({"a": a, "b": b, "why": "Table 1: " + RELATIONS["same_base_data_budget"].format(
                    kind="diffusion")})
    return out
