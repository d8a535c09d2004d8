"""Misspelled config keys are errors naming the key and the closest valid one, in every layer: ``fastdllm train``
configs (and --set), the DAG's ``training:`` and ``models.<name>.train:`` blocks; the paper-scale budget is never
used without a first-line warning."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from fastdllm_core.cli import train as train_cli
from fastdllm_core.training import config as train_config
from fastdllm_core.training import loop
from fastdllm_core.training.config import DEFAULTS, TrainConfig, UnknownKey, check_keys, merge_config
from fastdllm_dag.plan import checks as plan_checks

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def data_file(tmp_path):
    p = tmp_path / "sft.jsonl"
    p.write_text("".join(json.dumps({"prompt": f"{i}+1=?", "response": str(i + 1)}) + "\n" for i in range(8)))
    return str(p)


def _cfg(data_file, **over):
    c = {"model": {"init": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "kv_heads": 1}},
         "data": {"train_files": [data_file], "seq_len": 32}, "objective": {"block_size": 16},
         "optim": {"max_steps": 1, "batch_size": 2, "micro_batch_size": 2}, "train": {"save_every": 1}}
    c.update(over)
    return c


@pytest.mark.parametrize("patch,key,suggestion", [
    ({"optimm": {"max_steps": 5}}, "optimm", "optim"),
    ({"optim": {"max_step": 5}}, "optim.max_step", "optim.max_steps"),
    ({"optim": {"batchsize": 4}}, "optim.batchsize", "optim.batch_size"),
    ({"train": {"sav_every": 4}}, "train.sav_every", "train.save_every"),
    ({"data": {"seqlen": 64}}, "data.seqlen", "data.seq_len"),
    ({"objective": {"block": 16}}, "objective.block", "objective.block_size"),
    ({"model": {"init": "tiny", "tiny": {"hiden_size": 32}}}, "model.tiny.hiden_size", "model.tiny.hidden_size"),
    ({"recipee": "bd_pad"}, "recipee", "recipe"),
])
def test_train_config_rejects_unknown_keys(data_file, patch, key, suggestion):
    cfg = merge_config(_cfg(data_file), patch)
    with pytest.raises(UnknownKey) as ei:
        TrainConfig.from_dict(cfg)
    msg = str(ei.value)
    assert f"unknown key {key!r}" in msg and f"did you mean {suggestion!r}" in msg


def test_train_config_accepts_cli_keys_tiny_model_arguments_and_new_defaults(data_file, monkeypatch):
    cfg = _cfg(data_file)
    cfg["train"]["output_dir"] = "somewhere"  # read by `fastdllm train`
    cfg["model"]["tiny"]["rms_norm_eps"] = 1e-5  # any Qwen2Config argument
    TrainConfig.from_dict(cfg)
    with pytest.raises(UnknownKey, match="'optim' must be a mapping"):
        TrainConfig.from_dict({**cfg, "optim": 5})
    # the checks take their keys from the defaults (the dataclasses' fields): a field added there is accepted
    with pytest.raises(UnknownKey, match="optim.ema_decay"):
        check_keys({"optim": {"ema_decay": 1}})
    check_keys({"optim": {"ema_decay": 1}}, merge_config(DEFAULTS, {"optim": {"ema_decay": 0.0}}))


def test_cli_misspelling_fails_before_training(data_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(loop, "train", lambda *a, **k: pytest.fail("training started"))
    c = _cfg(data_file)
    c["optimm"] = c.pop("optim")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(c))
    assert train_cli.main(["--config", str(tmp_path / "c.yaml"), "--output-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'optimm'" in err and "did you mean 'optim'" in err
    # also through --set
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(_cfg(data_file)))
    assert train_cli.main(["--config", str(tmp_path / "d.yaml"), "--output-dir", str(tmp_path / "o"),
                       "--set", "optim.lrr=0.1"]) == 2
    assert "did you mean 'optim.lr'" in capsys.readouterr().err


@pytest.mark.parametrize("drop,max_steps_arg,expect", [
    (["max_steps", "batch_size"], None, ["optim.max_steps", "optim.batch_size", "6000", "256"]),
    (["batch_size"], None, ["optim.batch_size", "256"]),
    (["max_steps", "batch_size"], "3", ["optim.batch_size"]),
    ([], None, None),
])
def test_cli_says_so_on_the_first_line_when_the_paper_budget_is_used(data_file, tmp_path, capsys, monkeypatch,
                                                                     drop, max_steps_arg, expect):
    calls = []
    monkeypatch.setattr(loop, "train", lambda cfg, out, **k: calls.append((cfg, k)) or Path(out) / "final")
    c = _cfg(data_file)
    for k in drop:
        del c["optim"][k]
    c["optim"]["micro_batch_size"] = 1
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(c))
    argv = ["--config", str(tmp_path / "c.yaml"), "--output-dir", str(tmp_path / "o")]
    argv += ["--max-steps", max_steps_arg] if max_steps_arg else []
    assert train_cli.main(argv) == 0 and calls
    out = capsys.readouterr()
    first = out.err.splitlines()[0] if out.err else ""
    if expect is None:
        assert "PAPER-SCALE" not in out.err + out.out
    else:
        assert first.startswith("WARNING:") and "PAPER-SCALE" in first
        assert all(x in first for x in expect)
        if max_steps_arg:
            assert "optim.max_steps" not in first


# ------------------------------------------------------------------------------------------------ DAG config
@pytest.fixture(scope="module")
def dag_config():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.mark.parametrize("where,patch,msg", [
    ("training", {"optimm": {"max_steps": 5}}, "config field training: unknown key 'optimm'; did you mean 'optim'"),
    ("training", {"optim": {"max_stepss": 5}}, "unknown key 'optim.max_stepss'; did you mean 'optim.max_steps'"),
    ("models.ntp.train", {"optimm": {"lr": 1.0}}, "config field models.ntp.train: unknown key 'optimm'"),
    ("models.ar_base.train", {"model": {"tiny": {"layer": 2}}}, "did you mean 'model.tiny.layers'"),
    ("models.ntp.train", {"inti": "ar_base"}, "did you mean 'init'"),
])
def test_dag_training_blocks_reject_unknown_keys(dag_config, where, patch, msg):
    c = copy.deepcopy(dag_config)
    node = c
    for k in where.split("."):
        node = node[k]
    node.update(merge_config(node, patch))
    with pytest.raises(plan_checks.ConfigError, match=msg.replace("(", r"\(").replace("?", r"\?")):
        plan_checks.check(c)


def test_dag_schema_types_the_training_block(dag_config):
    import jsonschema

    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    jsonschema.validate(dag_config, schema)
    for where, patch in (("training", {"optim": {"max_steps": "many"}}),
                         ("training", {"data": {"seq_len": 0}}),
                         ("models.ntp.train", {"optim": {"schedule": "exponential"}}),
                         ("training", {"optim": 5})):
        c = copy.deepcopy(dag_config)
        node = c
        for k in where.split("."):
            node = node[k]
        node.update(merge_config(node, patch) if isinstance(patch.get("optim"), dict) or "data" in patch
                    else patch)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(c, schema)
    # every key the schema types is a key of the TrainConfig (or the CLI's train.output_dir)
    sections = schema["definitions"]["training_sections"]
    for sec, sub in sections.items():
        known = set(DEFAULTS[sec]) | train_config.EXTRA_KEYS.get((sec,), set())
        assert set(sub["properties"]) <= known, sec
    assert set(schema["definitions"]["training"]["properties"]) <= set(DEFAULTS)
