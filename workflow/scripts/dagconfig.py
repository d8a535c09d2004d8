"""The DAG's view of the config: semantic checks (beyond the JSON schema), model paths, and the decoding
points and throughput sweeps every table and figure needs.  Imported by the Snakefile and the tests."""
from __future__ import annotations

import copy
import os
import re
from pathlib import Path

from fastdllm_core.evaluation.synthetic import TASKS as SYNTH_TASKS

# a synthetic task -> the key of its test file among the synthetic suite's files (synthetic_files)
TASK_DATA_KEYS = {t: f"{t}_test" for t in SYNTH_TASKS}
DATASETS = ("pretrain", "sft", "adapt")  # the synthetic suite's training files (models.<m>.train.dataset)
POINT_RE = r"ar|bd_b\d+_s\d+_t[0-9.]+_c[01](@\d+)?"
AVG_COLUMNS = ["humaneval_base", "humaneval_plus", "mbpp_base", "mbpp_plus", "gsm8k", "math", "ifeval", "mmlu", "gpqa"]


# Which model each table and figure uses (config `roles:`): role -> (required mode, what uses it).  The paper's
# ablations (Tables 3, 4; Figure 6) are on the 1.5B model; its speed comparisons (Figures 1, 4, 5) set
# Fast-dLLM v2 (7B) against Qwen2.5-7B-Instruct; its case studies (Tables 5, 6) are Fast-dLLM v2 (7B).
ROLES = {
    "main_bd": ("bd", "the model under test: case studies (Tables 5, 6)"),
    "main_ar": ("ar", "the AR reference of the model under test (speedup_vs_main_ar of throughput rows)"),
    "ablation_bd": ("bd", "Tables 3, 4 and Figure 6 (a, b): decoding ablations (the paper's 1.5B model)"),
    "speed_bd": ("bd", "Figures 1a, 1b, 4 (threshold sweep) and 5: block diffusion in the speed comparisons "
                       "(the paper's Fast-dLLM v2 7B)"),
    "speed_ar": ("ar", "Figures 1a, 1b and 5: the AR side of the speed comparisons (the paper's Qwen2.5-7B-Instruct)"),
}


def role(config: dict, name: str) -> str:
    """The model key that plays ``name`` (one of :data:`ROLES`)."""
    return config["roles"][name]


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

    path = list(e.absolute_path)
    field = dotted(path) or "(top level)"
    kw, val, inst = e.validator, e.validator_value, e.instance
    if kw == "additionalProperties" and isinstance(inst, dict):
        allowed = sorted(e.schema.get("properties", {}))
        extra = sorted(k for k in inst if k not in allowed)
        key = extra[0] if extra else "?"
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f"; did you mean {dotted(path + [close[0]])!r}?" if close else ""
        return f"config field {dotted(path + [key])}: unknown key{hint} (allowed under {field}: {', '.join(allowed)})"
    if kw == "required":
        missing = [k for k in val if not isinstance(inst, dict) or k not in inst]
        return (f"config field {field}: required key {missing[0] if missing else val!r} is missing (needs "
                f"{', '.join(val)})")
    if kw == "enum" and isinstance(inst, str) and list(e.absolute_schema_path)[-2:-1] == ["propertyNames"]:
        close = difflib.get_close_matches(inst, [str(v) for v in val], n=1)
        hint = f"; did you mean {dotted(path + [close[0]])!r}?" if close else ""
        return f"config field {dotted(path + [inst])}: unknown key{hint} (allowed under {field}: {', '.join(val)})"
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


# ------------------------------------------------------------------------------------------------- checks
def check(config: dict) -> None:
    """Semantic checks the schema cannot express; raise :class:`ConfigError` naming the field."""
    models = config["models"]
    d = config["decode"]
    if d["block_size"] % d["sub_block_size"]:
        _fail("decode.sub_block_size", f"{d['sub_block_size']} must divide decode.block_size={d['block_size']}")
    for r, (mode, _) in ROLES.items():
        if r not in config["roles"]:
            _fail(f"roles.{r}", f"is missing; every role must be set ({', '.join(ROLES)})")
        if config["roles"][r] not in models:
            _fail(f"roles.{r}", f"unknown model {config['roles'][r]!r}; defined: {sorted(models)}")
        if models[config["roles"][r]]["mode"] != mode:
            _fail(f"roles.{r}", f"must name a model with mode: {mode} ({config['roles'][r]!r} has mode: "
                                f"{models[config['roles'][r]]['mode']})")
    _check_training_keys(config)
    for name, m in models.items():
        if m.get("use_released") and not m.get("source"):
            _fail(f"models.{name}.use_released", "is true but the model has no source")
        if "train" in m and not uses_released(m):
            init = m["train"]["init"]
            if init == name:
                _fail(f"models.{name}.train.init", "a model cannot be initialised from itself")
            if m["train"]["recipe"] == "ar_pretrain" and init != "tiny":
                _fail(f"models.{name}.train.init", "recipe ar_pretrain trains from random init: use init: tiny")
    _check_init_cycles(models)
    if any(is_trained(m) for m in models.values()):
        syn = config["data"].get("synthetic", {})
        if not syn.get("enabled") and not config["data"].get("train_files"):
            _fail("data.train_files", "is empty and data.synthetic.enabled is false, but some model is trained")
    cols = config["columns"]
    for tname in ("table1", "table2"):
        for i, row in enumerate(config["tables"][tname]["rows"]):
            if row["model"] not in models:
                _fail(f"tables.{tname}.rows[{i}].model", f"unknown model {row['model']!r}; defined: {sorted(models)}")
    for tname in ("table2", "table3", "table4"):
        for c in config["tables"][tname]["columns"]:
            if c not in cols:
                _fail(f"tables.{tname}.columns", f"unknown column {c!r}; choose from {sorted(cols)}")
    for s in config["tables"]["table3"]["sub_blocks"]:
        if d["block_size"] % s:
            _fail("tables.table3.sub_blocks", f"sub-block {s} does not divide decode.block_size={d['block_size']}")
    for s in config["figures"]["subblock"]["sub_blocks"]:
        if d["block_size"] % s:
            _fail("figures.subblock.sub_blocks", f"sub-block {s} does not divide decode.block_size={d['block_size']}")
    for f in ("threshold", "subblock"):
        c = config["figures"][f]["column"]
        if c not in cols or "task" not in cols[c]:
            _fail(f"figures.{f}.column", f"{c!r} must be a column with a task (not n/a)")
    if not any("task" in c for c in cols.values()):
        _fail("columns", "no column has a task: nothing would be evaluated")
    bt = config["bench"]["prompts_from"]
    if bt not in TASK_DATA_KEYS and bt not in config["data"].get("eval_paths", {}):
        _fail("bench.prompts_from", f"{bt!r} needs a local file in data.eval_paths (or use synth_arith)")
    for t in tasks(config):
        if t in TASK_DATA_KEYS and not config["data"].get("synthetic", {}).get("enabled"):
            _fail("columns", f"task {t!r} needs data.synthetic.enabled: true")


def _check_training_keys(config: dict) -> None:
    """``training:`` and every ``models.<name>.train:`` accept only the keys of ``fastdllm train`` configs
    (``fastdllm_core.train.DEFAULTS``; a model's block also ``init``): a misspelling fails naming the closest key."""
    from fastdllm_core.configkeys import UnknownKey, check_keys

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
        while cur in models and is_trained(models[cur]):
            if cur in seen:
                _fail(f"models.{name}.train.init", f"initialisation cycle {' -> '.join(seen + [cur])}")
            seen.append(cur)
            cur = models[cur]["train"]["init"]


# ------------------------------------------------------------------------------------------------- models
def uses_released(m: dict) -> bool:
    return bool(m.get("source")) and (m.get("use_released", True) or "train" not in m)


def is_trained(m: dict) -> bool:
    return "train" in m and not uses_released(m)


def run_dir(config: dict) -> str:
    return f"{config['results_dir']}/{config['scale']}"


def shared_path(config: dict, p: str) -> str:
    return p.replace("{shared}", config.get("shared_dir", "../shared"))


def model_final(config: dict, name: str) -> str:
    return f"{run_dir(config)}/models/{name}/run/final"


def model_source(config: dict, name: str) -> str:
    """What ``load_model`` gets: the trained checkpoint directory, or the released source (Hub id / dir / gguf)."""
    m = config["models"][name]
    return model_final(config, name) if is_trained(m) else shared_path(config, m["source"])


def model_inputs(config: dict, name: str) -> list[str]:
    """Snakemake inputs of a job using model ``name`` (the checkpoint when it is trained here)."""
    return [model_final(config, name)] if is_trained(config["models"][name]) else []


def trained_models(config: dict) -> list[str]:
    return [n for n, m in config["models"].items() if is_trained(m)]


def synthetic_files(config: dict) -> dict[str, str]:
    """The synthetic suite's files (training datasets and test sets) under ``results/<scale>/data/synthetic``."""
    root = f"{run_dir(config)}/data/synthetic"
    files = {d: f"{root}/{d}.jsonl" for d in DATASETS}
    files.update({f"{t}_test": f"{root}/{task.test_file}" for t, task in SYNTH_TASKS.items()})
    return files


def train_files(config: dict, name: str) -> list[str]:
    """Training files of model ``name``: its synthetic ``train.dataset`` (when the suite is enabled), and for
    the adaptation data (``dataset: adapt``, the default) the external ``data.train_files``."""
    dataset = config["models"][name]["train"].get("dataset", "adapt")
    files = [synthetic_files(config)[dataset]] if config["data"].get("synthetic", {}).get("enabled") else []
    if dataset == "adapt":
        files += [shared_path(config, f) for f in config["data"].get("train_files", [])]
    return files


def training_config(config: dict, name: str, train_files: list[str]) -> dict:
    """The ``fastdllm train`` config of model ``name``: config.training, overridden by the model's train block."""
    def merge(a, b):
        out = copy.deepcopy(a)
        for k, v in (b or {}).items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
        return out

    m = config["models"][name]["train"]
    cfg = merge(config.get("training", {}), {k: v for k, v in m.items() if k not in ("init", "dataset", "processes")})
    init = m["init"]
    cfg.setdefault("model", {})
    cfg["model"]["init"] = (model_final(config, init) if init in config["models"]
                            and is_trained(config["models"][init]) else
                            model_source(config, init) if init in config["models"] else shared_path(config, init))
    cfg.setdefault("data", {})
    cfg["data"]["train_files"] = list(train_files)
    cfg.setdefault("train", {})
    if config.get("device") in ("cpu", "cuda"):
        cfg["train"]["device"] = config["device"]
    return cfg


def train_threads(config: dict, name: str) -> int:
    """Cores of model ``name``'s training job: ``train.processes`` (default 1).  On the CPU they are data-parallel
    processes of one thread each; Snakemake caps them at ``--cores`` and runs other jobs beside a 1-core job."""
    return int(config["models"][name]["train"].get("processes", 1))


RECIPE_COST = {"ar_pretrain": 4, "sft": 4, "bd_pad_cm": 3, "bd_naive": 2, "bd_pad": 2, "ntp": 1}


def train_priority(config: dict, name: str) -> int:
    """Snakemake priority of a training job: the costlier recipe first (the complementary-mask recipe costs
    twice the others), so that the longest job does not end up last on the critical path."""
    return 10 + RECIPE_COST.get(config["models"][name]["train"]["recipe"], 0)


def eval_priority(config: dict, job: str) -> int:
    """Evaluation jobs of the models the sweeps use come first among evaluations (they have the most points)."""
    model = evaluation_jobs(config)[job]["model"]
    return 1 if model in {role(config, r) for r in ("ablation_bd", "speed_bd")} else 0


def init_inputs(config: dict, name: str) -> list[str]:
    init = config["models"][name]["train"]["init"]
    return model_inputs(config, init) if init in config["models"] else []


# ------------------------------------------------------------------------------------------------- points
def fmt_thr(t: float) -> str:
    return f"{float(t):g}"


def point_name(mode: str, decode: dict | None = None) -> str:
    if mode == "ar":
        return "ar"
    return (f"bd_b{decode['block_size']}_s{decode['sub_block_size']}_t{fmt_thr(decode['threshold'])}"
            f"_c{int(bool(decode['use_sub_block_cache']))}")


def point_limit(point: str) -> int | None:
    """The number of test items of a point measured on a prefix of the test set (``<point>@N``), else None."""
    return int(point.rsplit("@", 1)[1]) if "@" in point else None


def parse_point(point: str) -> dict | None:
    """``None`` for AR, else the decode parameters encoded in the name (a ``@N`` item limit is ignored)."""
    point = point.split("@", 1)[0]
    if point == "ar":
        return None
    m = re.fullmatch(r"bd_b(\d+)_s(\d+)_t([0-9.]+)_c([01])", point)
    if not m:
        raise ValueError(f"bad decoding point {point!r}")
    return {"block_size": int(m[1]), "sub_block_size": int(m[2]), "threshold": float(m[3]),
            "use_sub_block_cache": m[4] == "1"}


def tasks(config: dict) -> list[str]:
    return list(dict.fromkeys(c["task"] for c in config["columns"].values() if "task" in c))


def col_task(config: dict, col: str) -> str | None:
    return config["columns"][col].get("task")


def base_decode(config: dict) -> dict:
    d = config["decode"]
    return {k: d[k] for k in ("block_size", "sub_block_size", "threshold", "use_sub_block_cache")}


def speed_decode(config: dict) -> dict:
    """The speed setting of the throughput figures: ``speed_threshold`` (and the sub-block cache when
    ``speed_use_sub_block_cache``), the rest as the accuracy setting."""
    return dict(base_decode(config), threshold=config["speed_threshold"],
                use_sub_block_cache=bool(config.get("speed_use_sub_block_cache",
                                                    config["decode"]["use_sub_block_cache"])))


def gpu_batch_decode(config: dict) -> dict:
    """Figure 5's setting (the paper: threshold 0.9 with the sub-block cache on)."""
    return dict(speed_decode(config),
                use_sub_block_cache=bool(config["figures"]["gpu_batch"].get("use_sub_block_cache", True)))


def fig1a_models(config: dict) -> list[str]:
    """Models drawn in Figure 1a: the speed pair (speed_bd vs speed_ar, whose ratio is the speed-up) and the
    other Table 1 rows as context points."""
    out = [role(config, "speed_bd"), role(config, "speed_ar")]
    return out + [r["model"] for r in config["tables"]["table1"]["rows"] if r["model"] not in out]


def accuracy_points(config: dict) -> list[tuple[str, str, str]]:
    """Every (model, task, point) some table or figure needs, deduplicated.

    Tables 1 and 2 use every test item; the sweeps (Tables 3-4, the figures) use the first ``eval.sweep_limit``
    items (the point is then named ``<point>@N``), unless the same point is measured on all items anyway."""
    pts: list[tuple[str, str, str]] = []
    models = config["models"]
    sweep_limit = config["eval"].get("sweep_limit")

    def add(model, task, decode, sweep=False):
        if task is None:
            return
        p = point_name(models[model]["mode"], decode)
        if sweep and sweep_limit and p != "ar":
            p = f"{p}@{sweep_limit}"
        if (model, task, p) not in pts:
            pts.append((model, task, p))

    base, abl, speed_bd = base_decode(config), role(config, "ablation_bd"), role(config, "speed_bd")
    t1_tasks = tasks(config)
    for row in config["tables"]["table1"]["rows"]:
        for t in t1_tasks:
            add(row["model"], t, base)
    for row in config["tables"]["table2"]["rows"]:
        for c in config["tables"]["table2"]["columns"]:
            add(row["model"], col_task(config, c), base)
    for s in config["tables"]["table3"]["sub_blocks"]:
        for c in config["tables"]["table3"]["columns"]:
            add(abl, col_task(config, c), dict(base, sub_block_size=s), sweep=True)
    for b in config["tables"]["table4"]["block_sizes"]:
        for c in config["tables"]["table4"]["columns"]:
            add(abl, col_task(config, c), dict(base, block_size=b, sub_block_size=b), sweep=True)
    f = config["figures"]
    for th in f["threshold"]["thresholds"]:
        add(speed_bd, col_task(config, f["threshold"]["column"]), dict(base, threshold=th), sweep=True)
    for m in fig1a_models(config):  # fig 1a: accuracy at the speed setting
        add(m, col_task(config, f["threshold"]["column"]), speed_decode(config), sweep=True)
    for s in f["subblock"]["sub_blocks"]:
        for cache in f["subblock"]["caches"]:
            add(abl, col_task(config, f["subblock"]["column"]),
                dict(speed_decode(config), sub_block_size=s, use_sub_block_cache=cache), sweep=True)
    full = set(pts)  # a sweep point also measured on every item is taken from that measurement
    return [(m, t, p) for m, t, p in pts if "@" not in p or (m, t, p.split("@")[0]) not in full]


def case_conversations(config: dict, kind: str) -> list[list[str]]:
    """The case studies of ``kind`` as conversations (lists of user turns): single_turn, one per prompt."""
    c = config["tables"]["cases"][kind]
    return [[m] for m in c] if kind == "single_turn" else [list(turns) for turns in c]


def case_summary(config: dict, kind: str) -> str:
    """Every conversation with its user turns (whitespace-normalised), for the dry-run message of the job."""
    convs = case_conversations(config, kind)
    out = [f"[{i}] " + " / ".join(f'"{" ".join(u.split())}"' for u in turns) for i, turns in enumerate(convs, 1)]
    how = (" (each later user turn follows the model's own previous answers)"
           if any(len(c) > 1 for c in convs) else "")
    return f"{len(convs)} conversation(s){how}: " + "; ".join(out)


def accuracy_path(config: dict, job: str) -> str:
    """One CSV per evaluation job (see :func:`evaluation_jobs`)."""
    return f"{run_dir(config)}/accuracy/{job}.csv"


def evaluations(config: dict) -> dict[tuple[str, str], list[str]]:
    """(model, task) -> the decoding points to evaluate, in first-needed order."""
    out: dict[tuple[str, str], list[str]] = {}
    for m, t, p in accuracy_points(config):
        out.setdefault((m, t), []).append(p)
    return out


SWEEP_POINTS_PER_JOB = 8


def evaluation_jobs(config: dict) -> dict[str, dict]:
    """Evaluation jobs: ``{job: {"model": m, "points": {task: [points]}}}``.

    A model's full-test-set points (Tables 1-2) form one job named after the model (loaded once for all its
    tasks); its sweep points (``<point>@N``) are split into jobs ``<model>.sweep<k>`` of at most
    :data:`SWEEP_POINTS_PER_JOB` points, so that a model with many decoding settings is evaluated on every core."""
    jobs: dict[str, dict] = {}
    sweeps: dict[str, list[tuple[str, str]]] = {}
    for (m, t), pts in evaluations(config).items():
        for p in pts:
            if "@" in p:
                sweeps.setdefault(m, []).append((t, p))
            else:
                jobs.setdefault(m, {"model": m, "points": {}})["points"].setdefault(t, []).append(p)
    for m, items in sweeps.items():
        for k in range(0, len(items), SWEEP_POINTS_PER_JOB):
            job = jobs.setdefault(f"{m}.sweep{k // SWEEP_POINTS_PER_JOB + 1}", {"model": m, "points": {}})
            for t, p in items[k:k + SWEEP_POINTS_PER_JOB]:
                job["points"].setdefault(t, []).append(p)
    return jobs


def fingerprint_files(paths) -> list:
    """(name, size, mtime) of every file under the given paths: changes when a checkpoint or data file changes."""
    out = []
    for p in paths:
        p = Path(p)
        files = sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else ([p] if p.is_file() else [])
        out += [(str(f), f.stat().st_size, int(f.stat().st_mtime)) for f in files]
    return out


def code_fingerprint() -> str:
    """Hash of the installed fastdllm_core sources (so cached measurements are redone when the code changes)."""
    import hashlib

    import fastdllm_core

    h = hashlib.sha256()
    for f in sorted(Path(fastdllm_core.__file__).parent.rglob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


# ------------------------------------------------------------------------------------------------- sweeps
def bench_sweeps(config: dict) -> dict[str, list[dict]]:
    """Throughput sweeps: name -> list of runs {model, mode, batch_size, decode}."""
    models, f = config["models"], config["figures"]
    abl, speed_bd, speed_ar = role(config, "ablation_bd"), role(config, "speed_bd"), role(config, "speed_ar")
    sp = speed_decode(config)
    # Figure 1b: the speed pair at every batch size; Figure 1a: every drawn model at batch 1
    pair = [speed_bd, speed_ar]
    batch_runs = [(m, b) for m in pair for b in f["batch"]["batches"]]
    batch_runs += [(m, 1) for m in fig1a_models(config) if (m, 1) not in batch_runs]
    sweeps = {
        "batch": [{"model": m, "mode": models[m]["mode"], "batch_size": b, "decode": sp} for m, b in batch_runs],
        "threshold": [{"model": speed_bd, "mode": "bd", "batch_size": f["threshold"]["batch"],
                       "decode": dict(base_decode(config), threshold=t)} for t in f["threshold"]["thresholds"]],
        "subblock": [{"model": abl, "mode": "bd", "batch_size": b,
                      "decode": dict(sp, sub_block_size=s, use_sub_block_cache=c)}
                     for b in f["subblock"]["batches"] for s in f["subblock"]["sub_blocks"]
                     for c in f["subblock"]["caches"]],
    }
    if config["gpu"]:
        gd = gpu_batch_decode(config)
        sweeps["gpu_batch"] = (
            [{"model": speed_ar, "mode": "ar", "batch_size": b, "decode": gd} for b in f["gpu_batch"]["batches"]]
            + [{"model": speed_bd, "mode": "bd", "batch_size": b, "decode": gd} for b in f["gpu_batch"]["batches"]])
    return sweeps


def decode_summary(decodes: list[dict]) -> str:
    """``threshold 0.9, block 32, sub-block 8, sub-block cache on`` (values that vary joined by commas)."""
    def vals(key, fmt):
        return ",".join(dict.fromkeys(fmt(d[key]) for d in decodes))

    cache = vals("use_sub_block_cache", lambda c: "on" if c else "off")
    return (f"threshold {vals('threshold', fmt_thr)}, block {vals('block_size', str)}, sub-block "
            f"{vals('sub_block_size', str)}, sub-block cache {cache}")


def sweep_summary(config: dict, sweep: str) -> str:
    """Which model runs at which batch sizes and decoding settings in a sweep (dry-run message of the bench job)."""
    by: dict[str, list] = {}
    for r in bench_sweeps(config)[sweep]:
        by.setdefault(f"{r['model']} ({r['mode']})", []).append(r)
    out = []
    for m, runs in by.items():
        text = f"{m} batch {','.join(dict.fromkeys(str(r['batch_size']) for r in runs))}"
        if runs[0]["mode"] == "bd":
            text += " at " + decode_summary([r["decode"] for r in runs])
        out.append(text)
    return "; ".join(out)


def eval_summary(config: dict, job: dict) -> str:
    """Model, tasks, decoding points and generation length of an evaluation job (its dry-run message)."""
    mnt = config["decode"]["max_new_tokens"]
    length = ("each benchmark's own (lm-eval max_gen_toks / EvalPlus), recorded in every row" if mnt == "task"
              else f"{mnt} tokens on every task, recorded in every row")
    pts = sorted({p for ps in job["points"].values() for p in ps})
    return (f"model {job['model']}; tasks {', '.join(job['points'])}; {len(pts)} decoding point(s) "
            f"({', '.join(pts[:4])}{', ...' if len(pts) > 4 else ''}); generation length: {length}")


def table_rows_summary(config: dict, table: str) -> str:
    """The models of Table 1 or 2's rows, each said to be trained here or a released checkpoint (dry-run message of
    the table job); Table 2 adds whether its trained rows share the training budget."""
    models = config["models"]
    rows = [r["model"] for r in config["tables"][table]["rows"]]
    released = "released checkpoint (not trained here)" if table == "table2" else "released weights"
    out = ", ".join(f"{m} ({'trained here' if is_trained(models[m]) else released})" for m in rows)
    trained = [m for m in rows if is_trained(models[m])]
    if table == "table2" and len(trained) > 1:
        same = len({repr(training_config(config, m, []).get("optim")) for m in trained}) == 1 and \
            len({models[m]["train"]["init"] for m in trained}) == 1
        out += ("; the trained rows share init, code and optimiser budget" if same else
                "; the trained rows differ in init or optimiser budget")
    return out


def role_summary(config: dict, *names: str) -> str:
    """``model (roles.name)`` for each role (dry-run messages of the table and figure jobs)."""
    return ", ".join(f"{role(config, n)} (roles.{n})" for n in names)


def sweep_models(config: dict, sweep: str) -> list[str]:
    return list(dict.fromkeys(r["model"] for r in bench_sweeps(config)[sweep]))


def gpu_result_files(results_dir: str) -> list[str]:
    """Committed GPU throughput CSVs (``results/gpu/**/*.csv``)."""
    root = Path(results_dir) / "gpu"
    return sorted(str(p) for p in root.rglob("*.csv")) if root.is_dir() else []


def require_device(config: dict) -> str:
    """The device a model job runs on; with ``gpu: true`` fail clearly (before any work) when CUDA is missing."""
    import torch

    want = config.get("device", "auto")
    if config.get("gpu") or want == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("this job is configured for a GPU (gpu: true / device: cuda) but no CUDA device is "
                               "available on this machine; run the embedded default (config/config.yaml) on CPU, "
                               "or set gpu: false and device: cpu -- CPU numbers are never labelled as GPU numbers")
        return "cuda"
    if want == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return want


def env_threads() -> int:
    return int(os.environ.get("OMP_NUM_THREADS", "1"))
