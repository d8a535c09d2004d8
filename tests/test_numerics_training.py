"""Training numerics pinned against tests/data/numerics/training.json.

One small chain like the embedded default's (config/config.yaml): synthetic suite (fixed seed, a few rows per
task) -> ``ar_pretrain`` from a random tiny Qwen2 with a byte-level BPE trained on the pretraining text -> ``sft``
from that checkpoint -> ``ntp``, ``bd_naive``, ``bd_pad``, ``bd_pad_cm`` from the SFT checkpoint.  Model options
as the embedded default's (BPE of 768, ``mask_init: zero``, the AR base's shape, block 32, eps 1e-3), with
sequences of 4 blocks and 4 optimiser steps of 4 micro-batches (gradient accumulation), one torch thread (the
DAG's CPU thread policy).  Each case runs the real ``fastdllm_core.training.loop.train`` and pins, per recipe:

* exactly: the config train() resolved (``TrainConfig.to_dict()``: the defaults merged in), the training file's
  sha256, the tokenizer (vocab,
  merges, added tokens), the [MASK] id, the packed dataset, the initial weights (sha256 of a random init; the
  [MASK] row's largest absolute value), and per step the sha256 of the batch (input ids and labels of every
  micro-batch, as ``step_views`` hands them to the loop), of the noise masks, and the number of supervised tokens;
* within tolerances (tests/numerics_check.py): per step the loss, gradient norm and learning rate that
  metrics.csv records, and per tensor the norm and a fixed projection of the initial and the trained weights.

``noise_batch`` is also pinned on a large input (a change of eps' size flips too few of the chain's mask bits to
be seen).  The two-process path of the AR base (``train_processes``, torchrun) must give the single process'
numbers within the same tolerances.  A meant change: ``python -m pytest tests/test_numerics_training.py
--update-numerics --reason "..."``.  A new case (a recipe, a seed: ``config`` overrides) is a new entry of
:data:`CASES`; the others' entries stay as they are.
"""
from __future__ import annotations

import copy
import csv
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import numerics_check as nc
from fastdllm_core.training import launch
from fastdllm_core.training import loop as T
from fastdllm_core.training.config import merge_config

STORE = "training"
SUITE = {"seed": 0, "n_eval": 4, "n_pretrain": 6, "n_sft": 4, "n_adapt": 4}  # synthetic.write_suite
BASE = {
    "model": {"tokenizer": "bpe", "vocab_size": 768, "mask_init": "zero",
              "tiny": {"hidden_size": 128, "layers": 4, "heads": 4, "kv_heads": 2, "intermediate_size": 384}},
    "data": {"seq_len": 128, "max_examples": None, "drop_after_answer": True},
    "objective": {"block_size": 32, "eps": 0.001},
    "optim": {"lr": 1e-4, "weight_decay": 0.0, "warmup_steps": 2, "max_steps": 4, "batch_size": 8,
              "micro_batch_size": 2, "grad_clip": 1.0, "schedule": "constant"},
    "train": {"seed": 0, "save_every": 100, "log_every": 1, "dtype": "auto", "gradient_checkpointing": False,
              "device": "cpu"},
}
# case -> recipe, starting model ("tiny" or another case), training file of the suite, config overrides
CASES = {
    "ar_pretrain": {"recipe": "ar_pretrain", "init": "tiny", "data": "pretrain",
                    "config": {"optim": {"lr": 3e-3, "schedule": "cosine"}}},
    "sft": {"recipe": "sft", "init": "ar_pretrain", "data": "sft",
            "config": {"optim": {"lr": 1e-3, "schedule": "cosine"}}},
    "ntp": {"recipe": "ntp", "init": "sft", "data": "adapt"},
    "bd_naive": {"recipe": "bd_naive", "init": "sft", "data": "adapt"},
    "bd_pad": {"recipe": "bd_pad", "init": "sft", "data": "adapt"},
    "bd_pad_cm": {"recipe": "bd_pad_cm", "init": "sft", "data": "adapt"},
    "dream": {"recipe": "dream", "init": "sft", "data": "adapt"},
}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def case_config(case: str) -> dict:
    """The training config of ``case`` with placeholders for its paths (what the stored entry records)."""
    spec = CASES[case]
    cfg = merge_config(BASE, spec.get("config"))
    cfg["recipe"] = spec["recipe"]
    cfg["model"]["init"] = "tiny" if spec["init"] == "tiny" else f"<case {spec['init']}>/final"
    cfg["data"]["train_files"] = [f"<suite>/{spec['data']}.jsonl"]
    return cfg


class Chain:
    """Runs the cases (each after the case it starts from), once per module, capturing what each step used."""

    def __init__(self, root: Path):
        from fastdllm_core.synthetic import write_suite

        self.root = root
        self.files = write_suite(root / "suite", **SUITE)
        self.done: dict[str, dict] = {}

    def config(self, case: str) -> dict:
        cfg = case_config(case)
        init = CASES[case]["init"]
        if init != "tiny":
            cfg["model"]["init"] = str(self.run(init)["final"])
        cfg["data"]["train_files"] = [self.files[CASES[case]["data"]]]
        return cfg

    def run(self, case: str, out: str | None = None) -> dict:
        if out is None and case in self.done:
            return self.done[case]
        cfg = self.config(case)
        out_dir = self.root / (out or case)
        cap: dict = {"steps": []}
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(T, "model_and_data", _capture_start(T.model_and_data, cap))
            mp.setattr(T, "step_views", _capture_step(T.step_views, cap))
            final = T.train(copy.deepcopy(cfg), out_dir, progress=False)
        o = cfg["optim"]
        assert len(cap["steps"]) == o["max_steps"], (
            f"train() called fastdllm_core.training.loop.step_views {len(cap['steps'])} times "
            f"for {o['max_steps']} steps: "
            "the capture of this test no longer matches the training loop")
        rows = read_metrics(out_dir)
        assert [r["step"] for r in rows] == list(range(1, o["max_steps"] + 1))
        steps = {}
        for (batch, noise, norm), r in zip(cap["steps"], rows):
            assert r["supervised_tokens"] == norm
            steps[f"step {r['step']}"] = {"batch": batch, "noise": noise, **{k: r[k] for k in METRIC_KEYS}}
        trained = load_file(str(Path(final) / "model.safetensors"))
        values = {
            "config": _placeholders(cap.pop("config"), cfg, case_config(case)),
            "data_sha256": nc.sha256_bytes(Path(self.files[CASES[case]["data"]]).read_bytes()),
            **cap["start"],
            "steps": steps,
            "final_weights": nc.weights_summary(trained),
        }
        res = {"values": values, "final": Path(final), "final_sha256": nc.weights_sha256(trained)}
        if out is None:
            self.done[case] = res
        return res


METRIC_KEYS = ("supervised_tokens", "lr", "loss", "grad_norm")


def read_metrics(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.csv", newline="") as fh:
        return [{"step": int(r["step"]), "supervised_tokens": int(r["supervised_tokens"]), "lr": float(r["lr"]),
                 "loss": float(r["loss"]), "grad_norm": float(r["grad_norm"])} for r in csv.DictReader(fh)]


def _placeholders(resolved: dict, cfg: dict, stored: dict) -> dict:
    """The config train() resolved (DEFAULTS merged in), with the run's paths put back as placeholders."""
    out = copy.deepcopy(resolved)
    out["model"]["init"] = stored["model"]["init"]
    out["data"]["train_files"] = stored["data"]["train_files"]
    assert cfg["data"]["train_files"] == resolved["data"]["train_files"]
    return out


def _capture_start(model_and_data, cap: dict):
    def wrapped(cfg, *args):
        cap["config"] = cfg.to_dict()
        model, tok, mask_id, ds = model_and_data(cfg, *args)
        weights = nc.named_weights(model)
        every = list(range(len(ds)))  # the run's token store, read whole: the sequences build_dataset made
        start = {"tokenizer": nc.tokenizer_fingerprint(tok), "mask_id": mask_id,
                 "dataset": {"sequences": len(ds),
                             "ids_labels_sha256": nc.sha256_tensors(ds.input_ids[every], ds.labels[every])},
                 "init_mask_row_abs_max": float(model.get_input_embeddings().weight[mask_id].detach().abs().max()),
                 "init_weights": nc.weights_summary(weights)}
        if cfg.model.init == "tiny":  # a seeded random init: exact
            start["init_weights_sha256"] = nc.weights_sha256(weights)
        cap["start"] = start
        return model, tok, mask_id, ds
    return wrapped


def _capture_step(step_views, cap: dict):
    def wrapped(ds, cfg, step, n_micro):
        views, norm, n_seq = step_views(ds, cfg, step, n_micro)
        batch = nc.sha256_tensors(*[t for v in views for t in v[:2]])
        noise = nc.sha256_tensors(*[v[2] for v in views]) if views[0][2] is not None else None
        cap["steps"].append((batch, noise, norm))
        return views, norm, n_seq
    return wrapped


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return Chain(tmp_path_factory.mktemp("numerics_training"))


@pytest.mark.parametrize("case", list(CASES))
def test_training_numerics(chain, case, request):
    nc.check(request.config, STORE, case, chain.run(case)["values"])


def test_noise_schedule(request):
    """``noise_batch`` (per block t ~ U(eps, 1), complementary views) on 64 x 1024 positions with the training
    loop's generators, exactly: the cases above draw a few thousand positions, too few to see a change of the
    size of eps (1e-3) in t."""
    from fastdllm_core.training import objective as obj
    from fastdllm_core.training.data import IGNORE

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, 700, (64, 1024), generator=g)
    labels = ids.clone()
    labels[:, :100] = IGNORE  # a prompt: never masked
    gens = [obj.sample_generator(0, 7, i) for i in range(64)]
    ids2, lab2, m = obj.noise_batch(ids, labels, block_size=32, eps=1e-3, complementary=True, generators=gens)
    nc.check(request.config, STORE, "noise_batch", {
        "sha256": nc.sha256_tensors(ids2, lab2, m), "masked_first_view": int(m[:64].sum()),
        "masked": int(m.sum())})


def test_stored_cases_are_the_tests_cases(request):
    nc.check_cases(request.config, STORE, list(CASES) + ["noise_batch"])


def test_same_process_twice_gives_identical_numbers(chain):
    """bd_pad_cm (noise, complementary views, accumulation) again in this process: every value and the trained
    weights bit for bit."""
    first = chain.run("bd_pad_cm")
    again = chain.run("bd_pad_cm", out="bd_pad_cm_again")
    assert again["values"] == first["values"]
    assert again["final_sha256"] == first["final_sha256"]


@pytest.mark.slow
def test_two_processes_follow_the_single_process(chain, tmp_path):
    """The AR base's path in the DAG (``train_processes``: torchrun, 2 gloo processes of one thread): the same
    batches (supervised tokens per step), losses, gradient norms, learning rates, tokenizer and trained weights
    as the single process, within the stored tolerances."""
    single = chain.run("ar_pretrain")["values"]
    final = launch.train_processes(chain.config("ar_pretrain"), tmp_path / "ddp", 2)
    rows = read_metrics(tmp_path / "ddp")
    assert {r["world_size"] for r in csv.DictReader(open(tmp_path / "ddp" / "metrics.csv"))} == {"2"}
    from fastdllm_core.loading import _load_tokenizer

    ddp = {"tokenizer": nc.tokenizer_fingerprint(_load_tokenizer(str(final), None, {"local_files_only": True})),
           "steps": {f"step {r['step']}": {k: r[k] for k in METRIC_KEYS} for r in rows},
           "final_weights": nc.weights_summary(load_file(str(Path(final) / "model.safetensors")))}
    want = {"tokenizer": single["tokenizer"], "final_weights": single["final_weights"],
            "steps": {s: {k: v[k] for k in METRIC_KEYS} for s, v in single["steps"].items()}}
    diff = nc.compare(want, ddp, ref="1 process")
    if diff:
        pytest.fail("ar_pretrain on 2 processes vs 1 process:\n  " + "\n  ".join(diff), pytrace=False)
