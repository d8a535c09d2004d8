"""The DAG config's checks: the JSON schema (a failure in one line naming the field, the bad value and what is
allowed; before it, ``--config`` strings read as the types the schema asks for) and the semantic checks the schema
cannot express.  Run at parse time by ``workflow/rules/common.smk``."""
from __future__ import annotations

import functools
import re
from pathlib import Path

from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import pairs, released
from fastdllm_dag.plan import points as plan_points

# the tasks whose sweep prompts load from the Hub without data.eval_paths (fastdllm_core.bench.prompt_source)
BENCH_HUB_TASKS = ("gsm8k",)


class ConfigError(ValueError):
    pass


def _fail(field: str, msg: str):
    raise ConfigError(f"config field {field}: {msg}")


# ------------------------------------------------------------------------------------------------- schema
def validate_schema(config: dict, schema_path) -> None:
    """Validate ``config`` against the JSON schema; on failure raise a short :class:`ConfigError` naming the
    field, the bad value and what is allowed (jsonschema's best match), instead of Snakemake's dump of the schema
    and the instance (hundreds of lines for a misspelled top-level key)."""
    import jsonschema
    import yaml

    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = list(validator.iter_errors(config))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors)
    more = f" ({len(errors) - 1} more problem{'s' if len(errors) > 2 else ''} after fixing this one may show)" \
        if len(errors) > 1 else ""
    raise ConfigError(explain_schema_error(best) + more)


def _short(v, n: int = 80) -> str:
    import json

    try:
        text = json.dumps(v, default=str)
    except (TypeError, ValueError):
        text = repr(v)
    return text if len(text) <= n else text[: n - 3] + "..."


def explain_schema_error(e) -> str:
    """One line: ``config field <path>: <bad value>; allowed: <what>``."""
    import difflib

    def dotted(parts) -> str:
        out = ""
        for p in parts:
            out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
        return out

    def unknown_key(key: str, allowed: list[str]) -> str:
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f"; did you mean {dotted(path + [close[0]])!r}?" if close else ""
        return f"config field {dotted(path + [key])}: unknown key{hint} (allowed under {field}: {', '.join(allowed)})"

    path = list(e.absolute_path)
    field = dotted(path) or "(top level)"
    kw, val, inst = e.validator, e.validator_value, e.instance
    if kw == "additionalProperties" and isinstance(inst, dict):
        allowed = sorted(e.schema.get("properties", {}))
        return unknown_key(min((k for k in inst if k not in allowed), default="?"), allowed)
    if kw == "required":
        missing = [k for k in val if not isinstance(inst, dict) or k not in inst]
        return (f"config field {field}: required key {missing[0] if missing else val!r} is missing (needs "
                f"{', '.join(val)})")
    if kw == "enum" and isinstance(inst, str) and list(e.absolute_schema_path)[-2:-1] == ["propertyNames"]:
        return unknown_key(inst, [str(v) for v in val])
    if kw == "propertyNames":
        return f"config field {field}: bad key name; {e.message}"
    what = {
        "enum": lambda: "one of " + ", ".join(_short(x) for x in val),
        "const": lambda: _short(val),
        "type": lambda: "a value of type " + (val if isinstance(val, str) else " or ".join(val)),
        "minimum": lambda: f"a number >= {val}", "maximum": lambda: f"a number <= {val}",
        "exclusiveMinimum": lambda: f"a number > {val}", "exclusiveMaximum": lambda: f"a number < {val}",
        "minLength": lambda: f"a string of at least {val} character(s)",
        "pattern": lambda: f"a string matching {val}",
        "minItems": lambda: f"a list of at least {val} item(s)", "maxItems": lambda: f"a list of at most {val} items",
        "minProperties": lambda: f"a mapping with at least {val} entr{'y' if val == 1 else 'ies'}",
    }.get(kw)
    if what is not None:
        allowed = what()
    elif kw in ("oneOf", "anyOf") and all(isinstance(s, dict) and "required" in s for s in val):
        allowed = "exactly one of: " + "; or ".join(" and ".join(s["required"]) for s in val)
    else:
        allowed = e.message if len(e.message) <= 200 else e.message[:197] + "..."
    return f"config field {field}: bad value {_short(inst)}; allowed: {allowed}"


# ------------------------------------------------------------------------------------------------- --config
_JSON_TYPES = {"null": type(None), "boolean": bool, "integer": int, "number": (int, float), "array": list,
               "object": dict}
_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")  # 1e-5 too, which YAML 1.1 reads as a string


def _deref(schema: dict, root: dict) -> dict:
    """``schema``, or what its ``$ref`` (``#/definitions/a/b``, within ``root``) points to."""
    while "$ref" in schema:
        schema = functools.reduce(lambda node, k: node[k], schema["$ref"].lstrip("#/").split("/"), root)
    return schema


def coerce_types(value, schema: dict, root: dict | None = None):
    """``value`` with each string where ``schema`` (a JSON schema; ``root`` holds its definitions) asks for a
    number, integer, boolean, null, list or mapping, and not for a string, read as YAML and kept if it then has
    that type (where the schema allows a string too, only YAML's null is read); at every depth, in lists too.
    ``snakemake --config 'decode={threshold: 0.8}'`` passes "0.8" (Snakemake types only a top-level scalar; below
    it, every scalar is a string, e.g. ``adaptation_seeds=[0, 1]`` gives ["0", "1"]): this gives 0.8.  A value
    that already fits comes back unchanged (every value of a valid config file); one that still does not is left
    for :func:`validate_schema` to refuse by name."""
    import yaml

    root = schema if root is None else root
    schema = _deref(schema, root)
    types = set()
    for s in [schema, *(_deref(b, root) for b in (*schema.get("oneOf", ()), *schema.get("anyOf", ())))]:
        types.update([s["type"]] if isinstance(s.get("type"), str) else s.get("type", ()))
    wanted = types & set(_JSON_TYPES)
    if "string" in types:  # a string fits: only YAML's null (null, ~) is read, where the schema allows it
        wanted &= {"null"}
    if isinstance(value, str) and value.strip() and wanted:
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = value
        if isinstance(parsed, str) and "number" in wanted and _FLOAT.fullmatch(parsed.strip()):
            parsed = float(parsed)
        if any(isinstance(parsed, _JSON_TYPES[t]) and not (isinstance(parsed, bool) and t in ("integer", "number"))
               for t in wanted):
            value = parsed
    if isinstance(value, dict):
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        return {k: coerce_types(v, props[k], root) if k in props else
                coerce_types(v, extra, root) if isinstance(extra, dict) else v for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [coerce_types(v, schema["items"], root) for v in value]
    return value


# ------------------------------------------------------------------------------------------------- checks
def check(config: dict) -> None:
    """Semantic checks the schema cannot express; raise :class:`ConfigError` naming the field."""
    d = config["decode"]
    if d["block_size"] % d["sub_block_size"]:
        _fail("decode.sub_block_size", f"{d['sub_block_size']} must divide decode.block_size={d['block_size']}")
    _check_roles(config)
    _check_training_keys(config)
    _check_models(config)
    released.check(config, _fail)
    _check_tables(config)
    _check_figures_and_tasks(config)


def _check_roles(config: dict) -> None:
    models = config["models"]
    for r, (mode, _) in plan.ROLES.items():
        if r not in config["roles"]:
            _fail(f"roles.{r}", f"is missing; every role must be set ({', '.join(plan.ROLES)})")
        name = config["roles"][r]
        if name not in models:
            _fail(f"roles.{r}", f"unknown model {name!r}; defined: {sorted(models)}")
        if models[name]["mode"] != mode:
            _fail(f"roles.{r}", f"must name a model with mode: {mode} ({name!r} has mode: {models[name]['mode']})")


def _check_models(config: dict) -> None:
    models = config["models"]
    for name, m in models.items():
        if m.get("use_released") and not m.get("source"):
            _fail(f"models.{name}.use_released", "is true but the model has no source")
        if "train" in m and not plan.uses_released(m):
            init = m["train"]["init"]
            if init == name:
                _fail(f"models.{name}.train.init", "a model cannot be initialised from itself")
            if m["train"]["recipe"] == "ar_pretrain" and init != "tiny":
                _fail(f"models.{name}.train.init", "recipe ar_pretrain trains from random init: use init: tiny")
    _check_init_cycles(models)
    _check_model_decoding(config)
    if any(plan.is_trained(m) for m in models.values()):
        syn = config["data"].get("synthetic", {})
        if not syn.get("enabled") and not config["data"].get("train_files"):
            _fail("data.train_files", "is empty and data.synthetic.enabled is false, but some model is trained")


def _check_model_decoding(config: dict) -> None:
    """A masked-diffusion model's own setting (``models.<m>.decode``, per task) is a valid DecodeConfig of its mode,
    and so is its Fast-dLLM v1 speed setting; a ``decode:`` block on another model is refused."""
    from fastdllm_core.decode_config import MODE_FIELDS, DecodeConfig

    for name, m in config["models"].items():
        if not plan_points.is_mdm(config, name):
            if "decode" in m:
                _fail(f"models.{name}.decode", f"only masked-diffusion models (mode llada or dream) have their own "
                                               f"decode block; {name!r} has mode {m['mode']} (see decode:)")
            continue
        decode = m.get("decode") or {}
        for task in [None, *(decode.get("per_task") or {})]:
            field = f"models.{name}.decode" + (f".per_task.{task}" if task else "")
            own = decode if task is None else decode["per_task"][task]
            extra = sorted(set(own) - set(MODE_FIELDS[m["mode"]]) - {"per_task"})
            if extra:  # a field no point carries would be dropped silently (sampling: every row is greedy)
                _fail(field, f"{', '.join(map(repr, extra))} cannot be set here: a {m['mode']} point carries only "
                             f"{', '.join(MODE_FIELDS[m['mode']])} (every row decodes greedily)")
            if "max_new_tokens" not in {**decode, **own} and not isinstance(config["decode"]["max_new_tokens"], int):
                _fail(field, "needs max_new_tokens (its generation length): decode.max_new_tokens is "
                             f"{config['decode']['max_new_tokens']!r}")
            try:
                DecodeConfig.from_dict(plan_points.model_decode(config, name, task)).validate(m["mode"])
            except (TypeError, ValueError) as exc:
                _fail(field, str(exc))
            try:
                DecodeConfig.from_dict(plan_points.v1_decode(config, name, task)).validate("v1")
            except (TypeError, ValueError) as exc:
                _fail("speed_v1", f"Fast-dLLM v1 on {name}" + (f" ({task})" if task else "") + f": {exc}")


def _check_divides(field: str, sub_blocks, block_size: int) -> None:
    for s in sub_blocks:
        if block_size % s:
            _fail(field, f"sub-block {s} does not divide decode.block_size={block_size}")


def _check_tables(config: dict) -> None:
    models, cols, t = config["models"], config["columns"], config["tables"]
    for tname in ("table1", "table2"):
        for i, row in enumerate(t[tname]["rows"]):
            if row["model"] not in models:
                _fail(f"tables.{tname}.rows[{i}].model", f"unknown model {row['model']!r}; defined: {sorted(models)}")
    _check_baselines(config)
    for tname in ("table2", "table3", "table4"):
        for c in t[tname]["columns"]:
            if c not in cols:
                _fail(f"tables.{tname}.columns", f"unknown column {c!r}; choose from {sorted(cols)}")
    _check_divides("tables.table3.sub_blocks", t["table3"]["sub_blocks"], config["decode"]["block_size"])


def _check_baselines(config: dict) -> None:
    """Table 1's ``baseline``: another row of the table (of any mode), with a ``relation`` the config does not
    contradict (:mod:`pairs`): for a model trained here, ``adapted_from`` names a model of its init chain (a 7B
    model is never differenced against a 1.5B one by accident), ``same_base_data_budget`` needs the same init,
    dataset and budget, and the relations the config cannot show need a ``relation_note``."""
    for i, row in enumerate(config["tables"]["table1"]["rows"]):
        if row.get("baseline") is None:
            for k in ("relation", "relation_note", "paper_baseline"):
                if k in row:
                    _fail(f"tables.table1.rows[{i}].{k}", "a relation describes the pair with a baseline: set "
                                                         "baseline too")
            continue
        _check_paper_baseline(i, row)
        try:
            pairs.check_pair(config, i, row)
        except pairs.PairError as exc:
            _fail(exc.field, exc.message)
    for i, row in enumerate(config["tables"]["table2"]["rows"]):
        if row.get("baseline") or {"relation", "relation_note", "paper_baseline"} & set(row):
            _fail(f"tables.table2.rows[{i}].baseline", "only Table 1 rows have a baseline (Table 2 compares "
                                                       "each recipe with the row above)")


def _check_paper_baseline(i: int, row: dict) -> None:
    """A Table 1 row's ``paper_baseline`` names a row of the paper's Table 1 (analysis/paper_values.py)."""
    from analysis import paper_values

    base = row.get("paper_baseline")
    if base is not None and paper_values.row_info("table1", base) is None:
        _fail(f"tables.table1.rows[{i}].paper_baseline", f"{base!r} is not a row of the paper's Table 1 (one of: "
                                                         f"{', '.join(paper_values.rows_of('table1'))})")


def _check_figures_and_tasks(config: dict) -> None:
    cols = config["columns"]
    _check_divides("figures.subblock.sub_blocks", config["figures"]["subblock"]["sub_blocks"],
                   config["decode"]["block_size"])
    for i, m in enumerate(config["figures"]["batch"].get("context") or []):
        if m not in config["models"]:
            _fail(f"figures.batch.context[{i}]", f"{m!r} is not a model (models.<name>)")
    for f in ("threshold", "subblock"):
        c = config["figures"][f]["column"]
        if c not in cols or "task" not in cols[c]:
            _fail(f"figures.{f}.column", f"{c!r} must be a column with a task (not n/a)")
    if not any("task" in c for c in cols.values()):
        _fail("columns", "no column has a task: nothing would be evaluated")
    bt = config["bench"]["prompts_from"]
    local = config["data"].get("eval_paths", {})
    if bt not in plan.TASK_DATA_KEYS and bt not in BENCH_HUB_TASKS and bt not in local:
        _fail("bench.prompts_from", f"{bt!r} needs a local file in data.eval_paths (or use synth_arith or "
                                    f"{', '.join(BENCH_HUB_TASKS)}, which load from the Hub without one)")
    for t in plan.tasks(config):
        if t in plan.TASK_DATA_KEYS and not config["data"].get("synthetic", {}).get("enabled"):
            _fail("columns", f"task {t!r} needs data.synthetic.enabled: true")


def _check_training_keys(config: dict) -> None:
    """``training:`` and every ``models.<name>.train:`` accept only the keys of ``fastdllm train`` configs
    (``fastdllm_core.training.config.TrainConfig``; a model's block also ``init``): a misspelling fails naming the
    closest key."""
    from fastdllm_core.training.config import UnknownKey, check_keys

    blocks = [("training", config.get("training") or {}, ())]
    blocks += [(f"models.{n}.train", m["train"], ("init", "dataset", "processes")) for n, m in config["models"].items()
               if "train" in m]
    for field, block, extra in blocks:
        try:
            check_keys(block, where=f"config field {field}", top_extra=extra)
        except UnknownKey as exc:
            raise ConfigError(str(exc)) from None


def _check_init_cycles(models: dict) -> None:
    for name in models:
        seen, cur = [], name
        while cur in models and plan.is_trained(models[cur]):
            if cur in seen:
                _fail(f"models.{name}.train.init", f"initialisation cycle {' -> '.join(seen + [cur])}")
            seen.append(cur)
            cur = models[cur]["train"]["init"]
