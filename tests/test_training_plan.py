"""The training plan on paper (fastdllm_core/training/memory.py, `fastdllm plan-training`): the exact parameter
count, the DDP / FSDP memory model and engine choice, the accumulation arithmetic and its errors, the time
extrapolated from the paper's wall clock, and the CLI on config/paper.yaml."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from fastdllm_core.cli import plan_training as cli
from fastdllm_core.training.config import TrainConfig
from fastdllm_core.training.memory import (
    HEADROOM,
    PUBLISHED_CONFIGS,
    Arch,
    activation_bytes,
    choose_engine,
    memory,
    model_config,
    n_params,
    plan_training,
)
from fastdllm_dag.plan import models as plan

ROOT = Path(__file__).resolve().parents[1]

Q15, Q7 = PUBLISHED_CONFIGS["Qwen/Qwen2.5-1.5B-Instruct"], PUBLISHED_CONFIGS["Qwen/Qwen2.5-7B-Instruct"]
H80 = 80 * 10**9


def paper_cfg(recipe="bd_pad_cm", **optim) -> TrainConfig:
    """config/paper.yaml's training: block with ``recipe`` (and optim overrides)."""
    raw = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())["training"]
    raw = dict(raw, recipe=recipe, optim=dict(raw["optim"], **optim), data=dict(raw["data"], train_files=["x"]))
    return TrainConfig.from_dict(raw, check_files=False)


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("head_dim", [None, 6])
def test_n_params_is_the_hf_models_numel(tied, head_dim):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    kw = dict(hidden_size=48, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
              intermediate_size=80, vocab_size=97, tie_word_embeddings=tied)
    if head_dim:
        kw["head_dim"] = head_dim  # not hidden / heads (= 8): the projections follow head_dim
    model = Qwen2ForCausalLM(Qwen2Config(**kw))
    assert n_params(kw) == sum(p.numel() for p in model.parameters())
    # and from a saved config.json (what a local model directory gives)
    assert n_params(model.config.to_dict()) == sum(p.numel() for p in model.parameters())


def test_published_parameter_counts():
    assert round(n_params(Q15) / 1e9, 2) == 1.54 and n_params(Q15) == 1_543_714_304
    assert round(n_params(Q7) / 1e9, 2) == 7.62 and n_params(Q7) == 7_615_616_512


def test_model_config_reads_a_local_directory_else_the_table(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(dict(Q7, vocab_size=1000)))
    assert model_config(str(tmp_path))["vocab_size"] == 1000
    assert model_config("Qwen/Qwen2.5-7B-Instruct") == Q7
    with pytest.raises(ValueError, match="'org/unknown-model'.*no config.json"):
        model_config("org/unknown-model")
    with pytest.raises(ValueError, match="intermediate_size"):
        Arch.from_config({k: v for k, v in Q7.items() if k != "intermediate_size"})


def test_choose_engine_rule_is_the_plans_fit():
    cfg, arch = paper_cfg(), Arch.from_config(Q15)
    need = math.ceil(memory(cfg, arch, "ddp", 8).total * HEADROOM)
    assert choose_engine(cfg, arch, need, 8) == "ddp"  # exactly fits
    assert choose_engine(cfg, arch, need - 1, 8) == "fsdp"
    assert choose_engine(cfg, arch, 10**6, 1) == "ddp"  # nothing to shard over
    assert choose_engine(cfg, Arch.from_config(Q7), H80, 64) == "fsdp"
    for gb in (40, 80, 141):  # engine: auto never picks what the same plan says does not fit
        for q in (Q15, Q7):
            p = plan_training(cfg, q, 64, gb * 10**9, 8)
            assert p.engine == "fsdp" or p.fits, (gb, p.reason)
    with pytest.raises(ValueError, match="world_size must be a positive integer, got 0"):
        choose_engine(cfg, arch, H80, 0)


def test_ddp_buckets_and_fp32_logits_are_counted():
    cfg, arch = paper_cfg(), Arch.from_config(Q15)
    n = arch.n_params()
    assert memory(cfg, arch, "ddp", 8).buckets == 4 * n and memory(cfg, arch, "ddp", 1).buckets == 0
    assert memory(cfg, arch, "fsdp", 8).buckets == 0
    rows, L = 4 * 2, 2048  # micro batch 4, doubled by the complementary masks
    assert activation_bytes(cfg, arch)[1] == rows * L * Q15["vocab_size"] * 14  # bf16: 12 + 2 bytes a logit


def test_memory_terms():
    cfg, arch = paper_cfg(), Arch.from_config(Q7)
    n = arch.n_params()
    ddp = memory(cfg, arch, "ddp", 64)
    assert (ddp.params, ddp.grads, ddp.optimizer, ddp.compute_copy) == (4 * n, 4 * n, 8 * n, 2 * n)  # bf16
    fsdp = memory(cfg, arch, "fsdp", 64)
    assert fsdp.params == 4 * -(-n // 64) and fsdp.optimizer == 2 * fsdp.params
    assert fsdp.compute_copy == (2 * 2 + 4) * Q7["vocab_size"] * Q7["hidden_size"]  # the lm_head is the largest unit
    # activations: complementary masks double the batch, block diffusion doubles the sequence (x_t ++ x_0)
    cm, pad, ntp = (activation_bytes(paper_cfg(r), arch) for r in ("bd_pad_cm", "bd_pad", "ntp"))
    assert cm == (2 * pad[0], 2 * pad[1]) and pad[0] == 2 * ntp[0] and pad[1] == ntp[1]
    L, micro = 2048, 4
    assert ntp[1] == micro * L * Q7["vocab_size"] * (12 + 2)
    assert ntp[0] == micro * L * (28 * 3584 + 8 * 3584 + 2 * 512 + 4 * 18944) * 2
    no_ckpt = TrainConfig.from_dict(dict(paper_cfg("ntp").to_dict(), train=dict(
        paper_cfg("ntp").to_dict()["train"], gradient_checkpointing=False)), check_files=False)
    assert activation_bytes(no_ckpt, arch)[0] == 28 * micro * L * (8 * 3584 + 2 * 512 + 4 * 18944) * 2
    with pytest.raises(ValueError, match="engine must be 'ddp' or 'fsdp', got 'zero3'"):
        memory(cfg, arch, "zero3", 64)


def test_ddp_refuses_the_7b_on_80gb_and_fsdp_over_64_fits():
    cfg = paper_cfg("bd_pad_cm", lr=1e-5, max_steps=2500)
    forced = plan_training(cfg, Q7, 64, H80, 8, engine="ddp")
    assert not forced.fits and forced.engine == "ddp"
    assert "DDP" in forced.reason and "7.62B" in forced.reason and "> 80 GB" in forced.reason
    with pytest.raises(ValueError, match="7.62B parameters need"):
        forced.require_fit()
    auto = plan_training(cfg, Q7, 64, H80, 8)
    assert auto.engine == "fsdp" and auto.fits and auto.reason == ""
    assert auto.fsdp.total * HEADROOM <= H80 < auto.ddp.total
    small = plan_training(paper_cfg(micro_batch_size=1), Q15, 64, H80, 8)
    assert small.engine == "ddp" and small.fits


def test_accumulation_tokens_and_hours():
    p = plan_training(paper_cfg(), Q15, 8, H80, 1)
    assert (p.global_batch, p.micro_batch, p.accumulation) == (256, 4, 8)  # 256 / (4 x 8)
    assert p.tokens == 6000 * 256 * 2048 and p.paper_reference == "1.5B"
    assert p.wall_hours == pytest.approx(8.0 * 64 / 8) and p.gpu_hours == pytest.approx(8.0 * 64)
    p7 = plan_training(paper_cfg("ntp", lr=1e-5, max_steps=2500), Q7, 64, H80, 8)
    assert p7.accumulation == 1 and p7.paper_reference == "7B" and p7.wall_hours == pytest.approx(12.0)
    half = plan_training(paper_cfg("ntp", lr=1e-5, max_steps=1250), Q7, 64, H80, 8)
    assert half.wall_hours == pytest.approx(6.0)  # linear in tokens
    with pytest.raises(ValueError, match="global batch 256 is not a multiple of micro batch 4 x 48 GPUs = 192"):
        plan_training(paper_cfg(), Q15, 48, H80, 6)
    with pytest.raises(ValueError, match="nodes=3 must be a positive integer dividing gpus=64"):
        plan_training(paper_cfg(), Q15, 64, H80, 3)
    with pytest.raises(ValueError, match="engine must be auto, ddp or fsdp, got 'deepspeed'"):
        plan_training(paper_cfg(), Q15, 64, H80, 8, engine="deepspeed")


def test_paper_config_trains_the_7b_nemo_ft_against_qwen_7b():
    cfg = plan.expand_seeds(cli.load_config([str(ROOT / "config" / "paper.yaml")]))
    m = cfg["models"]["nemo_ft_7b"]
    assert m["mode"] == "ar" and plan.is_trained(m)
    t = TrainConfig.from_dict(plan.training_config(cfg, "nemo_ft_7b", ["x"]), check_files=False)
    assert (t.recipe, t.model.init, t.optim.lr, t.optim.max_steps) == ("ntp", "Qwen/Qwen2.5-7B-Instruct", 1e-5, 2500)
    rows = {r["model"]: r for r in cfg["tables"]["table1"]["rows"]}
    assert rows["nemo_ft_7b"] == {"model": "nemo_ft_7b", "paper_row": "Qwen2.5-7B-Nemo-FT", "baseline": "qwen2.5_7b"}
    assert rows["nemo_ft_1.5b"]["baseline"] == "qwen2.5_1.5b"
    paper_rows = (ROOT / "analysis" / "paper_tables.csv").read_text()
    assert "table1,Qwen2.5-7B-Nemo-FT,Qwen2.5-7B-Nemo-FT,7B,7B+ Models,52.4," in paper_rows  # the paper's values


def test_cli_on_the_paper_config(capsys):
    rc = cli.main(["--configfile", str(ROOT / "config" / "paper.yaml")])
    out = capsys.readouterr().out
    assert rc == 0 and "64 GPUs of 80 GB on 8 node(s)" in out
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    assert set(rows) == {"model", "nemo_ft_1.5b", "bd_naive_1.5b", "bd_pad_1.5b", "bd_pad_cm_1.5b", "nemo_ft_7b"}
    assert ("| 7.62B | 1.31B | 2500 x 256 | 4 x 64 x 1 |" in rows["nemo_ft_7b"]
            and "| fsdp | yes | 12.0 | 768 |" in rows["nemo_ft_7b"])
    # the 1.5B recipe: DDP needs 74.8 GB a GPU (the fp32 logits of 8 x 2048 rows of 152k, DDP's buckets): FSDP
    assert "| 74.8 | 43.1 | fsdp | yes | 8.0 | 512 |" in rows["bd_pad_cm_1.5b"]
    rc = cli.main(["--configfile", str(ROOT / "config" / "paper.yaml"), "--include-released", "--gpus", "8",
                   "--nodes", "1"])
    out, err = capsys.readouterr()
    assert "| fastdllm_v2_7b |" in out and "| 4 x 8 x 8 |" in out and "| 96.0 | 768 |" in out
    # the 7B recipe at micro batch 4 on one node: its fp32 logits alone are 34.9 GB a GPU
    assert rc == 1 and "models.fastdllm_v2_7b does not fit: FSDP on 8 GPU(s) of 80 GB" in err and "81.6 GB" in err


def test_cli_refuses_naming_the_model_and_the_numbers(capsys):
    paper = str(ROOT / "config" / "paper.yaml")
    assert cli.main(["--configfile", paper, "--engine", "ddp"]) == 1
    err = capsys.readouterr().err
    assert "models.nemo_ft_7b does not fit: DDP on 64 GPU(s) of 80 GB: 7.62B parameters need" in err
    assert "models.nemo_ft_1.5b" not in err  # the first model is the 7B's (the 1.5B NTP run fits under DDP)
    assert cli.main(["--configfile", paper, "--gpus", "48"]) == 2
    assert ("models.nemo_ft_1.5b: global batch 256 is not a multiple of micro batch 4 x 48 GPUs"
            in capsys.readouterr().err)
    assert cli.main(["--configfile", "nope.yaml"]) == 2
    assert "--configfile nope.yaml: file not found" in capsys.readouterr().err


def test_cli_hardware_from_flags_or_config(tmp_path, capsys):
    cfg = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    del cfg["training_plan"]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert cli.main(["--configfile", str(tmp_path / "c.yaml")]) == 2
    assert "give --gpus or training_plan.gpus in the config" in capsys.readouterr().err
    cfg["training_plan"] = {"gpus": 64, "gpu_mem_gb": 80, "nodes": 0}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert cli.main(["--configfile", str(tmp_path / "c.yaml")]) == 2  # the DAG's schema names it
    assert "training_plan.nodes" in capsys.readouterr().err
    cfg["training_plan"] = {"gpus": 64, "gpu_mem_gb": 80}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert cli.main(["--configfile", str(tmp_path / "c.yaml"), "--nodes", "0"]) == 2  # a flag: checked here
    assert "--nodes / training_plan.nodes must be a positive integer, got 0" in capsys.readouterr().err
    # 40 GB: auto picks FSDP for the 1.5B recipe (DDP's 74.8 GB do not fit) and says that even FSDP does not
    # (the fp32 logits of micro batch 4 under complementary masks are 34.9 GB); 141 GB fit with DDP
    assert cli.main(["--configfile", str(tmp_path / "c.yaml"), "--nodes", "8", "--gpu-mem-gb", "40"]) == 1
    err = capsys.readouterr().err
    assert ("models.bd_pad_cm_1.5b does not fit: FSDP on 64 GPU(s) of 40 GB: 1.54B parameters need 43.1 GB per GPU "
            "(x1.2 headroom = 51.7 GB > 40 GB)") in err
    assert cli.main(["--configfile", str(tmp_path / "c.yaml"), "--nodes", "8", "--gpu-mem-gb", "141"]) == 0
    out = capsys.readouterr().out
    assert "| 74.8 | 43.1 | ddp | yes |" in out and "64 GPUs of 141 GB on 8 node(s)" in out
