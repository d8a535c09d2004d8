"""The DAG's view of the config: semantic checks (beyond the JSON schema), model paths, and the decoding
points and throughput sweeps every table and figure needs.  Imported by the Snakefile and the tests."""
from __future__ import annotations

import copy
import os
import re
from pathlib import Path

TASK_DATA_KEYS = {"synth_arith": "arith_test", "synth_code": "code_test"}
POINT_RE = r"ar|bd_b\d+_s\d+_t[0-9.]+_c[01]"
AVG_COLUMNS = ["humaneval_base", "humaneval_plus", "mbpp_base", "mbpp_plus", "gsm8k", "math", "ifeval", "mmlu", "gpqa"]


class ConfigError(ValueError):
    pass


def _fail(field: str, msg: str):
    raise ConfigError(f"config field {field}: {msg}")


# ------------------------------------------------------------------------------------------------- checks
def check(config: dict) -> None:
    """Semantic checks the schema cannot express; raise :class:`ConfigError` naming the field."""
    models = config["models"]
    d = config["decode"]
    if d["block_size"] % d["sub_block_size"]:
        _fail("decode.sub_block_size", f"{d['sub_block_size']} must divide decode.block_size={d['block_size']}")
    for role in ("main_bd", "main_ar"):
        if config["roles"][role] not in models:
            _fail(f"roles.{role}", f"unknown model {config['roles'][role]!r}; defined: {sorted(models)}")
    if models[config["roles"]["main_bd"]]["mode"] != "bd":
        _fail("roles.main_bd", "must name a model with mode: bd")
    if models[config["roles"]["main_ar"]]["mode"] != "ar":
        _fail("roles.main_ar", "must name a model with mode: ar")
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


def training_config(config: dict, name: str, train_files: list[str]) -> dict:
    """The ``fastdllm train`` config of model ``name``: config.training, overridden by the model's train block."""
    def merge(a, b):
        out = copy.deepcopy(a)
        for k, v in (b or {}).items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
        return out

    m = config["models"][name]["train"]
    cfg = merge(config.get("training", {}), {k: v for k, v in m.items() if k != "init"})
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


def parse_point(point: str) -> dict | None:
    """``None`` for AR, else the decode parameters encoded in the name."""
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
    return dict(base_decode(config), threshold=config["speed_threshold"])


def accuracy_points(config: dict) -> list[tuple[str, str, str]]:
    """Every (model, task, point) some table or figure needs, deduplicated."""
    pts: list[tuple[str, str, str]] = []
    models = config["models"]

    def add(model, task, decode):
        if task is None:
            return
        p = point_name(models[model]["mode"], decode)
        if (model, task, p) not in pts:
            pts.append((model, task, p))

    base, main_bd = base_decode(config), config["roles"]["main_bd"]
    t1_tasks = tasks(config)
    for row in config["tables"]["table1"]["rows"]:
        for t in t1_tasks:
            add(row["model"], t, base)
    for row in config["tables"]["table2"]["rows"]:
        for c in config["tables"]["table2"]["columns"]:
            add(row["model"], col_task(config, c), base)
    for s in config["tables"]["table3"]["sub_blocks"]:
        for c in config["tables"]["table3"]["columns"]:
            add(main_bd, col_task(config, c), dict(base, sub_block_size=s))
    for b in config["tables"]["table4"]["block_sizes"]:
        for c in config["tables"]["table4"]["columns"]:
            add(main_bd, col_task(config, c), dict(base, block_size=b, sub_block_size=b))
    f = config["figures"]
    for th in f["threshold"]["thresholds"]:
        add(main_bd, col_task(config, f["threshold"]["column"]), dict(base, threshold=th))
    for row in config["tables"]["table1"]["rows"]:  # fig 1a: accuracy at the speed setting
        add(row["model"], col_task(config, f["threshold"]["column"]), speed_decode(config))
    for s in f["subblock"]["sub_blocks"]:
        for cache in f["subblock"]["caches"]:
            add(main_bd, col_task(config, f["subblock"]["column"]),
                dict(speed_decode(config), sub_block_size=s, use_sub_block_cache=cache))
    return pts


def accuracy_path(config: dict, model: str, task: str, point: str | None = None) -> str:
    """One CSV per (model, task) holding every decoding point the tables and figures need."""
    return f"{run_dir(config)}/accuracy/{model}/{task}.csv"


def evaluations(config: dict) -> dict[tuple[str, str], list[str]]:
    """(model, task) -> the decoding points to evaluate, in first-needed order."""
    out: dict[tuple[str, str], list[str]] = {}
    for m, t, p in accuracy_points(config):
        out.setdefault((m, t), []).append(p)
    return out


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
    main_bd, main_ar = config["roles"]["main_bd"], config["roles"]["main_ar"]
    sp = speed_decode(config)
    rows = [r["model"] for r in config["tables"]["table1"]["rows"]]
    for extra in (main_ar, main_bd):
        if extra not in rows:
            rows.append(extra)
    sweeps = {
        "batch": [{"model": m, "mode": models[m]["mode"], "batch_size": b, "decode": sp}
                  for m in rows for b in f["batch"]["batches"]],
        "threshold": [{"model": main_bd, "mode": "bd", "batch_size": f["threshold"]["batch"],
                       "decode": dict(base_decode(config), threshold=t)} for t in f["threshold"]["thresholds"]],
        "subblock": [{"model": main_bd, "mode": "bd", "batch_size": b,
                      "decode": dict(sp, sub_block_size=s, use_sub_block_cache=c)}
                     for b in f["subblock"]["batches"] for s in f["subblock"]["sub_blocks"]
                     for c in f["subblock"]["caches"]],
    }
    if config["gpu"]:
        sweeps["gpu_batch"] = (
            [{"model": main_ar, "mode": "ar", "batch_size": b, "decode": sp} for b in f["gpu_batch"]["batches"]]
            + [{"model": main_bd, "mode": "bd", "batch_size": b, "decode": sp} for b in f["gpu_batch"]["batches"]])
    return sweeps


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
