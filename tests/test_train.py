"""Training loop: determinism, kill-and-resume, multi-process, bad input (tiny model, CPU)."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from fastdllm_core.training.config import TrainConfig, merge_config
from fastdllm_core.training.loop import train

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("data") / "sft.jsonl"
    rows = [{"prompt": f"{a}+{b}=?", "response": f"{a + b}"} for a in range(8) for b in range(8)]
    p.write_text("\n".join(json.dumps(r) for r in rows))
    return str(p)


def cfg(data_file, recipe="bd_pad_cm", **optim):
    return {
        "recipe": recipe,
        "model": {"init": "tiny", "tiny": {"hidden_size": 32, "layers": 2, "heads": 2, "kv_heads": 1}},
        "data": {"train_files": [data_file], "seq_len": 64},
        "objective": {"block_size": 16},
        "optim": {"lr": 1e-3, "warmup_steps": 2, "max_steps": 6, "batch_size": 4, "micro_batch_size": 2,
                  "schedule": "cosine", **optim},
        "train": {"save_every": 3, "log_every": 1, "seed": 0},
    }


def weights(run: Path):
    return load_file(str(run / "final" / "model.safetensors"))


def test_kill_and_resume_equals_uninterrupted(tmp_path, data_file):
    c = cfg(data_file)
    full = tmp_path / "full"
    train(c, full, progress=False)
    killed = tmp_path / "killed"
    train(c, killed, stop_after=3, progress=False)  # "killed" after step 3 (checkpoint written at step 3)
    assert not (killed / "final").exists()
    assert (killed / "checkpoints" / "step-3" / "state.json").is_file()
    built = (killed / "data" / "meta.json").stat().st_mtime_ns
    train(c, killed, progress=False)  # restart: resumes from step 3
    assert (killed / "data" / "meta.json").stat().st_mtime_ns == built  # the token store is not rebuilt
    a, b = weights(full), weights(killed)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    rows = list(csv.DictReader(open(killed / "metrics.csv")))
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    ref = list(csv.DictReader(open(full / "metrics.csv")))
    assert [r["loss"] for r in rows] == [r["loss"] for r in ref]
    final_cfg = json.loads((full / "final" / "config.json").read_text())
    assert final_cfg["bd_size"] == 16 and final_cfg["mask_token_id"] == 3


@pytest.mark.parametrize("recipe", ["bd_naive", "bd_pad", "ntp", "ar_pretrain"])
def test_recipes_train_and_loss_falls(tmp_path, data_file, recipe):
    c = cfg(data_file, recipe=recipe, max_steps=12, lr=3e-3)
    c["train"]["save_every"] = 100
    train(c, tmp_path / recipe, progress=False)
    rows = list(csv.DictReader(open(tmp_path / recipe / "metrics.csv")))
    losses = [float(r["loss"]) for r in rows]
    assert all(l == l and l < 50 for l in losses)
    assert min(losses[-3:]) < losses[0]
    assert float(rows[-1]["tokens_per_s"]) > 0
    assert rows[-1]["git_commit"] and rows[-1]["torch_version"]


def test_grad_accumulation_matches_one_big_batch(tmp_path, data_file):
    a, b = cfg(data_file, micro_batch_size=1, max_steps=3), cfg(data_file, micro_batch_size=4, max_steps=3)
    train(a, tmp_path / "a", progress=False)
    train(b, tmp_path / "b", progress=False)
    wa, wb = weights(tmp_path / "a"), weights(tmp_path / "b")
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], atol=1e-5, rtol=1e-4)


@pytest.mark.slow
def test_two_process_ddp_follows_single_process(tmp_path, data_file):
    import yaml

    c = cfg(data_file, max_steps=4)
    c["train"]["save_every"] = 100
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(c))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # accelerate 1.x launches multi-CPU jobs through mpirun only; torchrun starts the two gloo processes, which
    # Accelerator picks up as DistributedType.MULTI_CPU (the same code path as `accelerate launch` on GPUs)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29517",
           "-m", "fastdllm_core.cli", "train", "--config", str(tmp_path / "c.yaml"),
           "--output-dir", str(tmp_path / "ddp"), "--no-progress"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    train(c, tmp_path / "single", progress=False)
    ddp = list(csv.DictReader(open(tmp_path / "ddp" / "metrics.csv")))
    single = list(csv.DictReader(open(tmp_path / "single" / "metrics.csv")))
    assert [r["world_size"] for r in ddp] == ["2"] * 4
    # same global batch, same masks: the loss curves agree up to float reduction order (stated tolerance 1e-4)
    for x, y in zip(ddp, single):
        assert x["lr"] == y["lr"]
        assert float(x["loss"]) == pytest.approx(float(y["loss"]), rel=1e-4, abs=1e-5)
    wa, wb = weights(tmp_path / "ddp"), weights(tmp_path / "single")
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("patch,match", [
    ({"data": {"seq_len": 60}}, "must divide seq_len"),
    ({"data": {"seq_len": 8}}, "smaller than block_size"),
    ({"recipe": "magic"}, "recipe: unknown 'magic'"),
    ({"optim": {"micro_batch_size": 3}}, "optim.micro_batch_size=3 must divide"),
    ({"optim": {"lr": "fast"}}, "optim.lr must be a number"),
    ({"data": {"train_files": []}}, "data.train_files is empty"),
    ({"data": {"train_files": ["/nonexistent.jsonl"]}}, "file not found: /nonexistent.jsonl"),
    ({"model": {"mask_init": "mean"}}, "model.mask_init must be one of .*'mean'"),
])
def test_bad_config(data_file, patch, match):
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        TrainConfig.from_dict(merge_config(cfg(data_file), patch))


def test_empty_dataset_file(tmp_path):
    p = tmp_path / "empty.jsonl"
    p.write_text("")
    c = cfg(str(p))
    with pytest.raises(ValueError, match="empty"):
        train(c, tmp_path / "run", progress=False)


def test_cli_set_and_yaml_numbers(tmp_path, data_file):
    import yaml

    from fastdllm_core.cli.train import main

    c = cfg(data_file, max_steps=2)
    c["optim"]["lr"] = "2e-3"  # YAML 1.1 reads 2e-3 as a string: accepted as a number
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(c))
    assert main(["--config", str(tmp_path / "c.yaml"), "--output-dir", str(tmp_path / "o"), "--no-progress",
                 "--set", "optim.max_steps=1"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "o" / "metrics.csv")))
    assert [r["step"] for r in rows] == ["1"]


def test_train_processes_runs_one_thread_per_process(tmp_path, data_file, monkeypatch):
    """The CPU thread policy: N data-parallel processes of one thread each, whatever thread variables the caller
    (e.g. Snakemake, which sets MKL_NUM_THREADS to the job's cores) has set; bad counts fail before any launch."""
    from fastdllm_core.training import launch as T

    seen = {}

    def fake_run(cmd, env, **kw):
        seen.update(cmd=cmd, env=env)

    monkeypatch.setattr(T, "run_until_stopped", fake_run)
    monkeypatch.setenv("MKL_NUM_THREADS", "2")
    c = cfg(data_file, max_steps=2)
    c["optim"].update(batch_size=4, micro_batch_size=2)
    T.train_processes(c, tmp_path / "run", 2)
    assert "--standalone" in seen["cmd"] and seen["cmd"][seen["cmd"].index("--nproc-per-node") + 1] == "2"
    assert all(seen["env"][v] == "1" for v in T.THREAD_VARIABLES)
    assert not list((tmp_path / "run").glob("*.yaml"))  # the temporary config is removed
    with pytest.raises(ValueError, match="cannot be split over 3 processes"):
        T.train_processes(c, tmp_path / "run", 3)
    with pytest.raises(ValueError, match="processes must be a positive integer"):
        T.train_processes(c, tmp_path / "run", 0)


@pytest.mark.parametrize("tied", [True, False])
def test_mask_init_zero_clears_only_the_mask_rows(tied):
    from fastdllm_core.tiny import tiny_model, tiny_qwen2_config
    from fastdllm_core.training.model_init import init_mask_embedding

    model = tiny_model(tiny_qwen2_config(vocab_size=32, hidden_size=16, layers=1, heads=2, kv_heads=1,
                                         tie_word_embeddings=tied))
    emb_before = model.get_input_embeddings().weight.detach().clone()
    out_before = model.get_output_embeddings().weight.detach().clone()
    init_mask_embedding(model, 5)
    emb, out = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    assert torch.count_nonzero(emb[5]) == 0 and torch.count_nonzero(out[5]) == 0
    others = [i for i in range(32) if i != 5]
    assert torch.equal(emb[others], emb_before[others]) and torch.equal(out[others], out_before[others])
    assert (emb.data_ptr() == out.data_ptr()) == tied


def test_mask_init_zero_reaches_the_trained_model(tmp_path, data_file):
    """``mask_init: zero`` is applied before the first step: after training, the [MASK] row is what the updates of
    a zero row made it (tiny, not the random init); ``keep`` leaves the random init to train from."""
    rows = {}
    for mode in ("keep", "zero"):
        c = cfg(data_file, max_steps=1, lr=1e-6)
        c["model"]["mask_init"] = mode
        train(c, tmp_path / mode, progress=False)
        w = weights(tmp_path / mode)
        rows[mode] = w["model.embed_tokens.weight"][3]   # the tiny tokenizer's mask id (see the resume test)
    assert rows["zero"].abs().max() < 1e-4 < rows["keep"].abs().max()


def test_dream_recipe_trains_and_saves_in_dreams_release_format(tmp_path, data_file):
    """The full-attention recipe's loss falls, and its checkpoint is written in Dream's release format, so that it
    loads as a masked-diffusion model with the logit shift and its own mask token, and decodes with Dream's sampler
    and with Fast-dLLM v1."""
    from fastdllm_core.decode_config import DecodeConfig
    from fastdllm_core.decoding.mdm_dispatch import mdm_generate
    from fastdllm_core.loading import load_model

    c = cfg(data_file, recipe="dream", max_steps=12, lr=3e-3)
    c["train"]["save_every"] = 100
    train(c, tmp_path / "dream", progress=False)
    losses = [float(r["loss"]) for r in csv.DictReader(open(tmp_path / "dream" / "metrics.csv"))]
    assert min(losses[-3:]) < losses[0]
    raw = json.loads((tmp_path / "dream" / "final" / "config.json").read_text())
    assert raw["model_type"] == "Dream" and raw["architectures"] == ["DreamModel"] and "bd_size" not in raw
    lm = load_model(str(tmp_path / "dream" / "final"), device="cpu", dtype="float32")
    assert lm.family.masked_diffusion and lm.family.logit_shift and lm.mask_token_id == raw["mask_token_id"]
    prompt = [lm.tokenizer.encode("3+4=?")]
    for mode, d in (("dream", DecodeConfig(max_new_tokens=16, alg="entropy")),
                    ("v1", DecodeConfig(max_new_tokens=16, block_size=8, threshold=0.9, cache="dual"))):
        out = mdm_generate(lm, prompt, mode, d)
        assert out.stats.nfe > 0 and len(out.sequences) == 1


def test_final_checkpoint_in_the_training_dtype(tmp_path, data_file):
    """train.dtype bf16 (the paper scale's): the consolidated checkpoint is bf16 and loads with transformers; on
    the CPU the training itself is fp32, so it is the fp32 run's weights rounded to bf16."""
    from transformers import AutoModelForCausalLM

    c32, c16 = cfg(data_file, max_steps=2), cfg(data_file, max_steps=2)
    c32["train"]["dtype"], c16["train"]["dtype"] = "fp32", "bf16"
    train(c32, tmp_path / "fp32", progress=False)
    train(c16, tmp_path / "bf16", progress=False)
    w32, w16 = weights(tmp_path / "fp32"), weights(tmp_path / "bf16")
    assert {t.dtype for t in w32.values()} == {torch.float32} and {t.dtype for t in w16.values()} == {torch.bfloat16}
    assert all(torch.equal(w16[k], w32[k].to(torch.bfloat16)) for k in w32)
    m = AutoModelForCausalLM.from_pretrained(tmp_path / "bf16" / "final", torch_dtype="auto")
    assert m.dtype == torch.bfloat16 and json.loads((tmp_path / "bf16" / "final" / "config.json").read_text())[
        "bd_size"] == 16
    with pytest.raises(ValueError, match="train.dtype must be one of .*'bf61'"):
        TrainConfig.from_dict(dict(c16, train=dict(c16["train"], dtype="bf61")))
