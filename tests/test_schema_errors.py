"""A config that breaks the JSON schema fails at parse time in a few lines naming the field, the bad value and
what is allowed (before: Snakemake printed the schema and the config, ~500 lines for a misspelled top-level key)."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from conftest import smk
from fastdllm_dag.plan import checks as plan_checks

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def _set(cfg, dotted, value):
    keys = dotted.split(".")
    node = cfg
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    node[keys[-1]] = value


@pytest.mark.parametrize("field,value,expect", [
    ("speed_threshold", 1.5, ["config field speed_threshold:", "bad value 1.5", "allowed: a number <= 1"]),
    ("trainig", {"optim": {}}, ["config field trainig: unknown key", "did you mean 'training'?", "allowed under"]),
    ("models.ntp.mode", "xx", ["config field models.ntp.mode:", 'bad value "xx"', 'one of "ar", "bd"']),
    ("columns.gsm8k.metrc", "m", ["config field columns.gsm8k.metrc: unknown key",
                                  "did you mean 'columns.gsm8k.metric'?"]),
    ("tables.table1.rows.0.paper_row", 3, ["config field tables.table1.rows[0].paper_row:", "bad value 3",
                                           "type string or null"]),
    ("decode.block_size", 0, ["config field decode.block_size:", "bad value 0", "a number >= 1"]),
    ("training.optim.max_steps", "many", ["config field training.optim.max_steps:", 'bad value "many"',
                                          "type integer"]),
    ("figures.subblock.caches", [], ["config field figures.subblock.caches:", "at least 1 item"]),
    # misspelled keys that were silently ignored before (the default tasks' data, then, came from elsewhere)
    ("data.eval_paths", {"gsm8kk": "/data/gsm8k.jsonl"}, ["config field data.eval_paths.gsm8kk: unknown key",
                                                          "did you mean 'data.eval_paths.gsm8k'?"]),
    ("tables.table2.colums", ["gsm8k"], ["config field tables.table2.colums: unknown key",
                                         "did you mean 'tables.table2.columns'?"]),
    ("tables.table1.lable", "x", ["config field tables.table1.lable: unknown key", "allowed under tables.table1"]),
])
def test_schema_error_is_one_short_line(config, field, value, expect):
    cfg = copy.deepcopy(config)
    _set(cfg, field, value)
    with pytest.raises(plan_checks.ConfigError) as ei:
        plan_checks.validate_schema(cfg, SCHEMA)
    msg = str(ei.value)
    assert "\n" not in msg and len(msg) < 400, msg
    for x in expect:
        assert x in msg, msg
    plan_checks.validate_schema(config, SCHEMA)  # the default config is valid


def test_missing_required_and_one_of(config):
    cfg = copy.deepcopy(config)
    del cfg["roles"]["main_bd"]
    with pytest.raises(plan_checks.ConfigError, match="config field roles: required key 'main_bd' is missing"):
        plan_checks.validate_schema(cfg, SCHEMA)
    cfg = copy.deepcopy(config)
    cfg["columns"]["gsm8k"] = {"comparable": True}
    with pytest.raises(plan_checks.ConfigError, match="config field columns.gsm8k:.*task and metric; or na"):
        plan_checks.validate_schema(cfg, SCHEMA)


def test_snakemake_prints_a_few_lines(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainig:\n  optim: {max_steps: 3}\n")
    r = smk("-n", "--nolock", "--cores", "1", "--configfile", str(bad), "--config", f"results_dir={tmp_path}")
    out = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode != 0
    assert len(out) <= 12, "\n".join(out)
    assert any("config field trainig: unknown key; did you mean 'training'?" in line for line in out), out


def test_eval_paths_accept_exactly_the_tasks():
    from fastdllm_core.evaluation import TASKS

    schema = yaml.safe_load(SCHEMA.read_text())
    names = schema["properties"]["data"]["properties"]["eval_paths"]["propertyNames"]["enum"]
    assert sorted(names) == sorted(TASKS)
    assert sorted(schema["definitions"]["column"]["properties"]["task"]["enum"]) == sorted(TASKS)
