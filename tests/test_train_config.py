"""The typed training config (``fastdllm_core.training.config.TrainConfig``): it reads the YAML of the CLI and the
DAG and writes the resolved YAML back byte for byte as the dict-based configuration did; the DAG's schema types
exactly its fields; a bad value is named before any work."""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import yaml

from fastdllm_core.training.config import DEFAULTS, RECIPES, SECTIONS, TrainConfig, UnknownKey

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = yaml.safe_load((ROOT / "tests" / "data" / "train_configs.yaml").read_text())


@pytest.fixture
def data_file(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text('{"prompt": "1+1=?", "response": "2"}\n')
    return str(p)


def _with_files(cfg: dict, path: str) -> dict:
    cfg = copy.deepcopy(cfg)
    cfg["data"]["train_files"] = [path]
    return cfg


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_resolved_yaml_is_byte_identical_to_the_dict_configs(case, data_file):
    config = TrainConfig.from_dict(_with_files(GOLDEN[case]["input"], data_file))
    out = config.to_dict()
    out["data"]["train_files"] = ["DATA"]
    assert yaml.safe_dump(out, sort_keys=False) == GOLDEN[case]["resolved"]


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_round_trip(case, data_file):
    config = TrainConfig.from_dict(_with_files(GOLDEN[case]["input"], data_file))
    text = yaml.safe_dump(config.to_dict(), sort_keys=False)
    again = TrainConfig.from_dict(yaml.safe_load(text))
    assert again == config
    assert yaml.safe_dump(again.to_dict(), sort_keys=False) == text


def test_golden_cases_cover_every_recipe_trained_by_the_dag():
    recipes = {yaml.safe_load(c["resolved"])["recipe"] for c in GOLDEN.values()}
    assert recipes == {"ar_pretrain", "sft", "ntp", "bd_naive", "bd_pad", "bd_pad_cm", "dream"}


def test_defaults_live_in_the_dataclasses():
    assert DEFAULTS == TrainConfig().to_dict()
    assert list(DEFAULTS) == ["recipe", *SECTIONS]
    for name, sec in SECTIONS.items():
        assert list(DEFAULTS[name]) == [f.name for f in dataclasses.fields(sec)]


def test_frozen_and_typed(data_file):
    config = TrainConfig.from_dict({"data": {"train_files": data_file}, "optim": {"lr": "2e-5"}})
    assert config.data.train_files == (data_file,) and config.optim.lr == 2e-5  # YAML 1.1's "2e-5" is a number
    assert config.optim.betas == (0.9, 0.999) and config.spec == RECIPES["bd_pad_cm"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.optim.lr = 1.0
    assert config.with_max_steps(7).optim.max_steps == 7 and config.optim.max_steps == 6000
    assert TrainConfig.from_dict({"data": {"train_files": [data_file]}, "optim": None}).optim == config.optim


@pytest.mark.parametrize("patch,message", [
    ({"recipe": "bd_padd"}, "recipe: unknown 'bd_padd'"),
    ({"optim": {"batch_size": 6, "micro_batch_size": 4}}, "optim.micro_batch_size=4 must divide"),
    ({"optim": {"lr": "fast"}}, "optim.lr must be a number, got 'fast'"),
    ({"optim": {"lr": -1}}, "optim.lr must be > 0"),
    ({"optim": {"schedule": "exponential"}}, "optim.schedule must be one of"),
    ({"optim": {"max_steps": 0}}, "optim.max_steps must be a positive integer, got 0"),
    ({"objective": {"eps": 1.5}}, "objective.eps must be in [0, 1)"),
    ({"objective": {"block_size": 48}}, "block_size D=48 must divide seq_len L=128"),
    ({"model": {"mask_init": "random"}}, "model.mask_init must be one of"),
    ({"model": {"tokenizer": "wordpiece"}}, "model.tokenizer must be 'char' or 'bpe', got 'wordpiece'"),
    ({"train": {"save_every": 0}}, "train.save_every must be a positive integer"),
    ({"data": {"train_files": []}}, "data.train_files is empty"),
    ({"data": {"train_files": ["/nonexistent/x.jsonl"]}}, "data.train_files: file not found: /nonexistent/x.jsonl"),
])
def test_bad_values_are_named(patch, message, data_file):
    from fastdllm_core.training.config import merge_config

    cfg = merge_config({"data": {"train_files": [data_file]}}, patch)
    with pytest.raises((ValueError, FileNotFoundError)) as ei:
        TrainConfig.from_dict(cfg)
    assert message in str(ei.value)


def test_unknown_keys_name_the_closest_field(data_file):
    with pytest.raises(UnknownKey, match="did you mean 'optim.warmup_steps'"):
        TrainConfig.from_dict({"data": {"train_files": [data_file]}, "optim": {"warmup_step": 3}})
    # train.output_dir is the CLI's option (the run directory), accepted and not part of the config
    config = TrainConfig.from_dict({"data": {"train_files": [data_file]}, "train": {"output_dir": "x"}})
    assert "output_dir" not in config.to_dict()["train"]


def test_the_dag_schema_types_exactly_the_config_fields():
    """workflow/schemas/config.schema.yaml's training blocks and TrainConfig cannot drift apart: the schema types
    every field of every section (and the CLI's train.output_dir), no other key, and the recipes' names."""
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())["definitions"]
    for name, sec in SECTIONS.items():
        typed = set(schema["training_sections"][name]["properties"])
        fields = {f.name for f in dataclasses.fields(sec)} | ({"output_dir"} if name == "train" else set())
        assert typed == fields, (name, typed ^ fields)
    assert set(schema["training"]["properties"]) == {"recipe", *SECTIONS}
    assert set(schema["recipe"]["enum"]) == set(RECIPES)
    import jsonschema

    jsonschema.Draft7Validator.check_schema({"definitions": schema, **schema["training"]})
