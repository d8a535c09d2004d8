"""Settings from the command line (issue 69): ``snakemake --config`` accepts any setting as a Snakemake user types
it.  Snakemake 9 types only a top-level scalar (``speed_threshold=0.8`` gives 0.8); below it every scalar arrives
as a string (``decode={threshold: 0.8}`` gives {"threshold": "0.8"}, ``adaptation_seeds=[0, 1]`` gives ["0", "1"],
``gpu=true`` gives "true").  ``plan_checks.coerce_types`` reads those strings as the types the schema asks for
before the schema check; a value that still does not fit is refused naming its field."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from conftest import smk
from fastdllm_dag.plan import checks as plan_checks
from fastdllm_dag.plan import models as plan

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = ROOT / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture(scope="module")
def schema():
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _config(name="config.yaml"):
    return yaml.safe_load((ROOT / "config" / name).read_text())


# (what Snakemake passes, what the checks see): one key of each type the schema asks for
TYPED = [
    ({"decode": {"threshold": "0.8"}}, {"decode": {"threshold": 0.8}}),
    ({"eval": {"batch_size": "8"}}, {"eval": {"batch_size": 8}}),
    ({"training": {"optim": {"max_steps": "100"}}}, {"training": {"optim": {"max_steps": 100}}}),
    ({"decode": {"use_sub_block_cache": "false"}}, {"decode": {"use_sub_block_cache": False}}),
    ({"gpu": "true"}, {"gpu": True}),
    ({"adaptation_seeds": ["0", "1"]}, {"adaptation_seeds": [0, 1]}),
    ({"adaptation_seeds": "[0, 1]"}, {"adaptation_seeds": [0, 1]}),
    ({"training": {"optim": {"betas": ["0.9", "0.95"]}}}, {"training": {"optim": {"betas": [0.9, 0.95]}}}),
    ({"eval": {"limit": "null", "shards": "null"}}, {"eval": {"limit": None, "shards": None}}),
    ({"data": {"adaptation": {"token_budget": "1e6"}}}, {"data": {"adaptation": {"token_budget": 1e6}}}),
    # oneOf: an integer or the word task
    ({"decode": {"max_new_tokens": "64"}}, {"decode": {"max_new_tokens": 64}}),
    ({"decode": {"max_new_tokens": "task"}}, {"decode": {"max_new_tokens": "task"}}),
    # additionalProperties: every model's block
    ({"models": {"ntp": {"train": {"processes": "2"}}}}, {"models": {"ntp": {"train": {"processes": 2}}}}),
    # a string is allowed: kept as it is (fastdllm train reads "1e-4"); only YAML's null is read
    ({"training": {"optim": {"lr": "1e-4", "grad_clip": "null"}}},
     {"training": {"optim": {"lr": "1e-4", "grad_clip": None}}}),
]


@pytest.mark.parametrize("given,typed", TYPED)
def test_strings_are_read_as_the_schema_types(schema, given, typed):
    assert plan_checks.coerce_types(given, schema) == typed


@pytest.mark.parametrize("given", [
    {"decode": {"threshold": "abc"}},
    {"eval": {"batch_size": "8.5"}},
    {"eval": {"batch_size": "8.0"}},  # an integer field takes no float, not even a whole one
    {"eval": {"batch_size": "true"}},  # nor a boolean
    {"decode": {"use_sub_block_cache": "maybe"}},
    {"adaptation_seeds": ["x"]},
    {"decode": {"threshold": ""}},
    {"decode": {"threshold": "[0.8"}},  # not YAML at all
])
def test_what_does_not_fit_is_left_as_it_came(schema, given):
    assert plan_checks.coerce_types(given, schema) == given


@pytest.mark.parametrize("name", ["config.yaml", "ci.yaml", "paper.yaml", "rehearsal.yaml"])
def test_config_files_come_back_unchanged(schema, name):
    cfg = _config(name)
    assert plan_checks.coerce_types(copy.deepcopy(cfg), schema) == cfg


def test_typed_values_are_never_changed(schema):
    given = {"decode": {"threshold": 0.8, "use_sub_block_cache": True}, "eval": {"batch_size": 8},
             "training": {"optim": {"lr": "2e-5"}, "data": {"train_files": "a.jsonl"}}, "adaptation_seeds": [0, 1]}
    assert plan_checks.coerce_types(copy.deepcopy(given), schema) == given


@pytest.mark.parametrize("field,given,expect", [
    ("decode.threshold", {"decode": {"threshold": "abc"}}, ['bad value "abc"', "type number"]),
    ("eval.batch_size", {"eval": {"batch_size": "8.5"}}, ['bad value "8.5"', "type integer"]),
    ("decode.use_sub_block_cache", {"decode": {"use_sub_block_cache": "maybe"}}, ['bad value "maybe"',
                                                                                  "type boolean"]),
    ("adaptation_seeds[1]", {"adaptation_seeds": ["0", "x"]}, ['bad value "x"', "type integer"]),
])
def test_a_bad_value_is_refused_by_name(schema, field, given, expect):
    from snakemake.utils import update_config

    cfg = _config()
    update_config(cfg, plan_checks.coerce_types(given, schema))
    with pytest.raises(plan_checks.ConfigError) as ei:
        plan_checks.validate_schema(plan_checks.coerce_types(cfg, schema), SCHEMA_PATH)
    msg = str(ei.value)
    assert msg.startswith(f"config field {field}:"), msg
    for x in expect:
        assert x in msg, msg


def test_what_snakemake_passes_reaches_the_plan_as_numbers(schema):
    """Snakemake's own parser, then its merge over the config file, then the coercion: the training config of a
    model (the merge of training: under its train: block) and fastdllm train's config see numbers."""
    from snakemake.cli import parse_config
    from snakemake.utils import update_config

    from fastdllm_core.training.config import TrainConfig

    cfg = _config()
    update_config(cfg, parse_config(["training={optim: {max_steps: 100, lr: 0.001}}", "adaptation_seeds=[0, 1]",
                                     "decode={threshold: 0.8}"]))
    cfg = plan_checks.coerce_types(cfg, schema)
    plan_checks.validate_schema(cfg, SCHEMA_PATH)
    assert cfg["decode"]["threshold"] == 0.8 and cfg["adaptation_seeds"] == [0, 1]
    assert sorted(n for n in plan.expand_seeds(cfg)["models"] if n.startswith("ntp")) == ["ntp", "ntp.seed1"]
    train = plan.training_config(cfg, "ntp", ["a.jsonl"])
    assert train["optim"]["max_steps"] == 100 and type(train["optim"]["max_steps"]) is int
    tc = TrainConfig.from_dict(train, check_files=False)
    assert (tc.optim.max_steps, tc.optim.lr) == (100, 0.001)


# ------------------------------------------------------------------------------------------------- snakemake -n
DRY = ("fig_attention_masks", "-n", "--nolock", "--cores", "1")  # a cheap target: the whole config is checked


@pytest.mark.slow
@pytest.mark.parametrize("setting", [
    "decode={threshold: 0.8}",  # number
    "training={optim: {max_steps: 100}}",  # integer
    "decode={use_sub_block_cache: false}",  # boolean
    "adaptation_seeds=[0, 1]",  # list of integers
])
def test_dry_run_accepts_the_setting(tmp_path, setting):
    r = smk(*DRY, "--config", f"results_dir={tmp_path}", setting)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "config field" not in r.stdout + r.stderr


@pytest.mark.slow
def test_dry_run_refuses_a_bad_value_by_name(tmp_path):
    r = smk(*DRY, "--config", f"results_dir={tmp_path}", "decode={threshold: abc}")
    assert r.returncode != 0
    assert 'config field decode.threshold: bad value "abc"; allowed: a value of type number' in r.stdout + r.stderr
