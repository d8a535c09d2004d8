"""The masked-diffusion modes end to end on tiny LLaDA / Dream stand-ins: lm-eval generate_until (synth_arith) and
the Monte Carlo log-likelihood (synth_mc), the rows' decoding columns, the CLIs, and throughput rows."""
from __future__ import annotations

import csv
import json

import pytest
import torch

from fastdllm_core import synthetic
from fastdllm_core.decode_config import DecodeConfig
from fastdllm_core.evaluation import run_task
from fastdllm_core.loading import load_model
from fastdllm_core.modeling import dream, llada

pytestmark = pytest.mark.usefixtures("hub_offline")  # conftest: the Hub and datasets offline


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("dllm_e2e")
    dirs = {"llada": llada.write_standin(root / "llada", seed=5), "dream": dream.write_standin(root / "dream", seed=6)}
    suite = synthetic.write_suite(root / "suite", n_pretrain=0, n_sft=20, n_adapt=0, n_eval=4)
    return {k: load_model(str(v)) for k, v in dirs.items()}, dirs, suite


POINTS = [("llada", "llada_g16_s8_b8_lc"), ("dream", "dream_g16_s8_entropy"), ("llada", "v1_g16_s2_b8_t0.5_dual"),
          ("dream", "v1_g16_s2_b8_t0.5_prefix")]


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
@pytest.mark.parametrize("family,point", POINTS, ids=[p for _, p in POINTS])
def test_generate_until_through_lm_eval(setup, tmp_path, family, point):
    models, _, suite = setup
    mode = DecodeConfig.slug_mode(point)
    decode = DecodeConfig.from_slug(point)
    rows = run_task(models[family], "synth_arith", mode=mode, decode=decode, batch_size=2, limit=2, out_dir=tmp_path,
                    data_path=suite["synth_arith_test"])
    for r in rows:
        assert r["status"] == "ok" and r["n"] == 2 and r["mode"] == mode
        assert r["gen_length"] == r["max_new_tokens"] == 16 and r["steps"] == decode.steps
        assert r["nfe"] > 0 and 0 < r["total_tokens"] <= 2 * 16 and r["tokens_per_s"] > 0
        assert r["loglikelihood_method"] == "" and r["mc_num"] == ""
    r = rows[0]
    if mode == "llada":
        assert r["remasking"] == "low_confidence" and r["alg"] == "" and r["cache"] == ""
    if mode == "dream":
        assert r["alg"] == "entropy" and r["remasking"] == "" and r["block_size"] == ""
    if mode == "v1":
        assert r["cache"] in ("dual", "prefix") and r["threshold"] == 0.5 and r["block_size"] == 8
    with open(tmp_path / "accuracy.csv") as fh:
        assert next(csv.DictReader(fh))["gen_length"] == "16"


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
@pytest.mark.parametrize("family,mode", [("llada", "llada"), ("dream", "dream")])
def test_multiple_choice_by_monte_carlo_likelihood(setup, tmp_path, family, mode):
    models, _, suite = setup
    decode = DecodeConfig(max_new_tokens=8, block_size=8).with_mode_defaults(mode)
    rows = run_task(models[family], "synth_mc", mode=mode, decode=decode, batch_size=2, limit=3, out_dir=tmp_path,
                    data_path=suite["synth_mc_test"], mc_num=4)
    acc = {r["metric"]: r for r in rows}["acc"]
    assert acc["status"] == "ok" and acc["n"] == 3 and acc["loglikelihood_method"] == "mc" and acc["mc_num"] == 4
    assert acc["total_tokens"] == "" and acc["gen_length"] == ""
    assert json.loads((tmp_path / "results.json").read_text())["config"]["mc_num"] == 4


def test_llada_one_token_likelihood_is_exact_and_dream_is_seeded(setup):
    """LLaDA's estimator masks k ~ U{1..len} continuation tokens: for one token (MMLU's letters) a single sample is
    log p(token | context, [MASK]) exactly, which is why the published MMLU setting uses mc_num=1."""
    from fastdllm_core.decoding.mdm_common import full_attention_kwargs
    from fastdllm_core.evaluation.lm_model import FastDLLMv2

    models, _, _ = setup
    lm = FastDLLMv2(model=models["llada"], mode="llada", max_new_tokens=8, mc_num=1, batch_size=1)
    ctx, cont = [10, 11, 12, 13], [14]
    score, greedy = lm._mc_loglik(ctx, cont)
    m = models["llada"]
    ids = torch.tensor([ctx + [m.mask_token_id]])
    with torch.no_grad():
        logits = m.model(input_ids=ids, **full_attention_kwargs(m.model, None, 5, 5)).logits
    assert score == pytest.approx(torch.log_softmax(logits[0, -1].double(), -1)[14].item(), rel=1e-5)
    assert greedy is False
    d1 = FastDLLMv2(model=models["dream"], mode="dream", max_new_tokens=8, mc_num=4, batch_size=2, seed=3)
    d2 = FastDLLMv2(model=models["dream"], mode="dream", max_new_tokens=8, mc_num=4, batch_size=2, seed=3)
    a, b = d1._mc_loglik(ctx, [14, 15]), d2._mc_loglik(ctx, [14, 15])
    assert a == b and a[0] < 0


def test_modes_must_suit_the_family(setup):
    from fastdllm_core.evaluation.lm_model import FastDLLMv2

    models, _, _ = setup
    with pytest.raises(ValueError, match="full-attention masked-diffusion"):
        FastDLLMv2(model=models["llada"], mode="bd")
    with pytest.raises(ValueError, match="logit shift"):
        FastDLLMv2(model=models["dream"], mode="llada")
    with pytest.raises(ValueError, match="max_new_tokens=task does not apply"):
        FastDLLMv2(model=models["llada"], mode="llada", max_new_tokens="task")
    with pytest.raises(ValueError, match="steps=3 must be a multiple"):
        FastDLLMv2(model=models["llada"], mode="v1", max_new_tokens=16, block_size=4, steps=3)


def test_cli_generate_and_bench(setup, tmp_path, capsys):
    from fastdllm_core.cli import main

    _, dirs, _ = setup
    rc = main(["generate", "--model", str(dirs["llada"]), "--prompt", "1+1=", "--mode", "llada", "--max-new-tokens",
               "8", "--steps", "4", "--block-size", "4", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["point"] == "llada_g8_s4_b4_lc" and doc["stats"]["nfe"] == 4
    assert doc["stats"]["gen_length"] == 8 and doc["stats"]["steps"] == 4
    rc = main(["generate", "--model", str(dirs["dream"]), "--prompt", "hi", "--mode", "bd"])
    assert rc == 2 and "masked-diffusion" in capsys.readouterr().err
    out = tmp_path / "bench.csv"
    rc = main(["bench", "--model", str(dirs["dream"]), "--out", str(out), "--modes", "--points",
               "dream_g8_s8_maskgit_plus", "v1_g8_s2_b4_t0.9_dual", "--batch-sizes", "1", "2", "--synthetic-prompts",
               "2", "--prompt-len", "6", "--repeats", "1", "--warmup", "0", "--quiet"])
    assert rc == 0
    with open(out) as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["mode"], r["batch_size"]) for r in rows] == [("dream", "1"), ("v1", "1"), ("dream", "2"), ("v1", "2")]
    for r in rows:
        assert r["gen_length"] == r["max_new_tokens"] == "8" and float(r["tokens_per_s"]) > 0 and int(r["nfe"]) > 0
    assert rows[0]["alg"] == "maskgit_plus" and rows[0]["steps"] == "8" and rows[1]["cache"] == "dual"
    assert rows[1]["point"] == "v1_g8_s2_b4_t0.9_dual" and rows[1]["threshold"] == "0.9"
    rc = main(["bench", "--model", str(dirs["llada"]), "--out", str(tmp_path / "x.csv"), "--modes", "bd",
               "--thresholds", "0.9", "--sub-block-sizes", "8", "--quiet"])
    assert rc == 2 and "masked-diffusion" in capsys.readouterr().err


@pytest.mark.slow(reason="torch.compile runs g++ (seen by the spawn guard of tests/conftest.py)")
def test_attention_implementations_give_the_same_tokens(setup):
    """sdpa, eager and flex attention (left-padded batch, no-cache and dual-cache forwards) decode alike."""
    from fastdllm_core.decoding import mdm_generate

    _, dirs, _ = setup
    ps = [[10, 11, 12, 13, 14, 15], [20, 21, 22]]
    cfgs = {"llada": DecodeConfig(max_new_tokens=8, steps=8, block_size=4),
            "v1": DecodeConfig(max_new_tokens=8, steps=2, block_size=4, threshold=0.2, cache="dual")}
    got = {}
    for attn in ("sdpa", "eager", "flex_attention"):
        lm = load_model(str(dirs["llada"]), dtype="float32", attn_implementation=attn)
        got[attn] = {m: mdm_generate(lm, ps, m, c, stop_token_ids=[]).sequences for m, c in cfgs.items()}
    assert got["eager"] == got["sdpa"] == got["flex_attention"]


# ------------------------------------------------------------------ loglikelihood_method=exact
@pytest.mark.parametrize("family", ["llada", "dream"])
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_exact_weights_count_each_masked_token_once(family, k):
    """A constant loss c per masked token has expectation k*c under both estimators (the loss weight undoes the
    masking probability): sum_m C(k, m) * m * w(m) = k."""
    import math

    from fastdllm_core.evaluation.likelihood import exact_weights

    w = exact_weights(k, family, eps=1e-3)
    assert sum(math.comb(k, m) * m * w[m - 1] for m in range(1, k + 1)) == pytest.approx(k, rel=1e-12)


def test_exact_dream_weights_match_numerical_integration():
    import numpy as np

    from fastdllm_core.evaluation.likelihood import exact_weights

    t = (np.arange(200000) + 0.5) / 200000
    p = (1 - 0.05) * t + 0.05
    want = [np.mean(p ** (m - 1) * (1 - p) ** (4 - m)) for m in range(1, 5)]
    assert exact_weights(4, "dream", eps=0.05) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_exact_likelihood_is_the_monte_carlo_estimators_expectation(setup, family):
    """The Monte Carlo estimate with many samples converges on the exact value (within 4 standard errors of the
    sample mean), for a three-token continuation; one token under LLaDA is one forward, equal to MC with one
    sample."""
    from fastdllm_core.evaluation.lm_model import FastDLLMv2

    models, _, _ = setup
    ctx, cont = [10, 11, 12, 13, 20], [14, 15, 16]
    exact = FastDLLMv2(model=models[family], mode=family, max_new_tokens=8, loglikelihood_method="exact",
                       batch_size=4)
    assert exact.ll_method == "exact" and "mc_num" not in exact.model_info
    e, greedy = exact._exact_loglik(ctx, cont)
    assert greedy is False and e < 0
    mc = FastDLLMv2(model=models[family], mode=family, max_new_tokens=8, mc_num=64, batch_size=64, seed=1)
    samples = torch.tensor([mc._mc_loglik(ctx, cont)[0] for _ in range(40)], dtype=torch.float64)
    se = samples.std() / len(samples) ** 0.5
    assert abs(samples.mean().item() - e) < 4 * se.item() + 1e-9, (e, samples.mean().item(), se.item())
    if family == "llada":
        one = FastDLLMv2(model=models[family], mode=family, max_new_tokens=8, mc_num=1, batch_size=1)
        assert exact._exact_loglik(ctx, [14])[0] == pytest.approx(one._mc_loglik(ctx, [14])[0], rel=1e-6)


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
def test_exact_likelihood_rows_and_refusal(setup, tmp_path):
    from fastdllm_core.evaluation.likelihood import EXACT_MAX_TOKENS
    from fastdllm_core.evaluation.lm_model import FastDLLMv2

    models, _, suite = setup
    decode = DecodeConfig(max_new_tokens=8).with_mode_defaults("dream")
    rows = run_task(models["dream"], "synth_mc", mode="dream", decode=decode, batch_size=4, limit=3,
                    out_dir=tmp_path, data_path=suite["synth_mc_test"], loglikelihood_method="exact")
    acc = {r["metric"]: r for r in rows}["acc"]
    assert acc["status"] == "ok" and acc["loglikelihood_method"] == "exact" and acc["mc_num"] == ""
    assert json.loads((tmp_path / "results.json").read_text())["config"]["mc_num"] is None
    lm = FastDLLMv2(model=models["dream"], mode="dream", max_new_tokens=8, loglikelihood_method="exact")
    with pytest.raises(ValueError, match=f"at most {EXACT_MAX_TOKENS}"):
        lm._loglikelihood_tokens([(("c", "x"), [10, 11], [12] * (EXACT_MAX_TOKENS + 1))])
    with pytest.raises(ValueError, match="does not apply to mode bd"):
        FastDLLMv2(model=models["dream"], mode="bd", loglikelihood_method="exact")


# ------------------------------------------------------------------ loglikelihood_method=auto
def test_auto_rule_exact_only_when_no_dearer_than_monte_carlo():
    from fastdllm_core.evaluation.likelihood import EXACT_MAX_TOKENS, resolve_mdm_method

    assert resolve_mdm_method("auto", [1, 1, 1, 1], 128) == "exact"     # MMLU letters: one forward, not 128
    assert resolve_mdm_method("auto", [7, 1], 128) == "exact"           # 127 patterns <= 128 samples
    assert resolve_mdm_method("auto", [8, 1], 128) == "mc"              # one long option: the whole batch mc
    assert resolve_mdm_method("auto", [1, 2], 2) == "mc"                # 3 patterns > 2 samples
    assert resolve_mdm_method("auto", [EXACT_MAX_TOKENS + 1], 10 ** 6) == "mc"
    assert resolve_mdm_method("mc", [1], 128) == "mc" and resolve_mdm_method("exact", [9], 4) == "exact"


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
@pytest.mark.parametrize("family", ["llada", "dream"])
def test_auto_likelihood_scores_and_records_the_method_used(setup, tmp_path, family):
    """``auto`` gives the exact scores on one-token options, the Monte Carlo ones (same seed) on long options, and
    the rows and results.json record the method used, not ``auto``."""
    from fastdllm_core.evaluation.lm_model import FastDLLMv2

    models, _, suite = setup
    ctx = [10, 11, 12, 13, 20]
    kw = dict(model=models[family], mode=family, max_new_tokens=8, batch_size=4, seed=2)
    auto = FastDLLMv2(loglikelihood_method="auto", mc_num=8, **kw)
    exact = FastDLLMv2(loglikelihood_method="exact", **kw)
    short = [(("c", str(t)), ctx, [t]) for t in (14, 15)]
    assert auto._loglikelihood_tokens(short) == exact._loglikelihood_tokens(short)
    assert auto.ll_method_used == "exact" and auto.model_info["mc_num"] == 8
    long = [(("c", "x"), ctx, [14, 15, 16, 17])]                       # 15 patterns > 8 samples
    mc = FastDLLMv2(loglikelihood_method="mc", mc_num=8, **kw)
    assert auto._loglikelihood_tokens(long) == mc._loglikelihood_tokens(long)
    assert auto.ll_method_used == "exact+mc"
    decode = DecodeConfig(max_new_tokens=8, block_size=8).with_mode_defaults(family)
    rows = run_task(models[family], "synth_mc", mode=family, decode=decode, batch_size=4, limit=3, out_dir=tmp_path,
                    data_path=suite["synth_mc_test"], loglikelihood_method="auto", mc_num=128)
    acc = {r["metric"]: r for r in rows}["acc"]
    cfg = json.loads((tmp_path / "results.json").read_text())["config"]
    assert acc["loglikelihood_method"] == cfg["loglikelihood_method"] == "exact" and acc["mc_num"] == ""


@pytest.mark.parametrize("family", ["llada", "dream", "bd"])
def test_the_options_of_one_question_share_their_forward(setup, tmp_path, family):
    """One-token options of one question (the MMLU column) have the same input wherever the option is masked or
    not yet read: one forward for all of them, and every score bit for bit the one a fresh model gives alone."""
    from fastdllm_core.evaluation.lm_model import FastDLLMv2

    models, _, _ = setup
    kw = {"mode": family, "max_new_tokens": 8, "loglikelihood_method": "exact"} if family != "bd" else \
        {"block_size": 4, "sub_block_size": 2}
    if family == "bd":
        from fastdllm_core.tiny import write_tiny_checkpoint

        model = load_model(str(write_tiny_checkpoint(tmp_path / "bd", seed=1)), dtype="float64")
    else:
        model = models[family]
    ctx, options = [10, 11, 12, 13, 20], [[14], [15], [16], [17]]
    lm = FastDLLMv2(model=model, **kw)
    calls = []
    hook = model.model.register_forward_hook(lambda *a: calls.append(1))
    try:
        got = lm._loglikelihood_tokens([(None, ctx, o) for o in options], disable_tqdm=True)
        assert len(calls) == 1
        alone = [FastDLLMv2(model=model, **kw)._loglikelihood_tokens([(None, ctx, o)], disable_tqdm=True)[0]
                 for o in options]
        lm._loglikelihood_tokens([(None, ctx, options[0])], disable_tqdm=True)  # a new batch forwards again
    finally:
        hook.remove()
    assert got == alone and len({s for s, _ in got}) == len(options)
    assert len(calls) == 1 + len(options) + 1
