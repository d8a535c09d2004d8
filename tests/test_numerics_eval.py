"""Evaluation numerics pinned against tests/data/numerics/eval.json.

The checkpoint: a seeded random tiny Qwen2 in float64 with the embedded default's tokenizer kind (a byte-level BPE
trained on the synthetic suite's pretraining text) and [MASK] row zeroed; the final norm's weight is multiplied by
16 (peaked predictions: about 3 in 4 greedy confidences exceed 0.9 and some are exactly 1.0, so the threshold and
its strict comparison matter) and the ``<|im_end|>`` embedding row by 2 (rows stop at different lengths, so EOS
handling matters).  Both factors are powers of two (exact); float64 keeps greedy choices clear of rounding
differences between machines.  Saved with
``save_pretrained`` and loaded by ``fastdllm_core.loading.load_model`` as the DAG loads a trained model.

Pinned exactly: the checkpoint (tokenizer, weights), the prompts' token ids, the greedy token ids of AR
(``ar_generate``) and block diffusion (``bd_generate``: block 32, sub-block 8, threshold 1.0 and 0.9, with and
without the sub-block cache) with their forward counts, and through ``run_task`` (lm-eval and EvalPlus, as the
DAG's evaluation jobs): every metric, the generated-token and forward counts and a sha256 per item of what was
prompted, generated, extracted and scored (multiple choice: the log-likelihoods within relative 1e-6).
A meant change: ``python -m pytest tests/test_numerics_eval.py --update-numerics --reason "..."``.
"""
from __future__ import annotations

import json

import pytest
import torch

import numerics_check as nc
from fastdllm_core.decode_config import DecodeConfig

STORE = "eval"
SUITE = {"seed": 0, "n_eval": 16, "n_pretrain": 6, "n_sft": 0, "n_adapt": 0}  # synthetic.write_suite
MAX_NEW = 64  # the embedded default's decode.max_new_tokens
BD_POINTS = [DecodeConfig(block_size=32, sub_block_size=8, threshold=t, use_sub_block_cache=c, max_new_tokens=MAX_NEW)
             for t in (1.0, 0.9) for c in (False, True)]
ACCURACY_POINT = BD_POINTS[0]  # the embedded default's accuracy setting (threshold 1.0, no sub-block cache)
# run_task cases: (task, mode, limit)
TASKS = [("synth_arith", "bd", 4), ("synth_arith", "ar", 4), ("synth_mc", "bd", 16), ("synth_mc", "ar", 16),
         ("synth_code", "bd", 3)]


def task_case(task: str, mode: str) -> str:
    return f"run_task/{task}/{ACCURACY_POINT.slug(mode)}"


CASES = (["checkpoint", "prompts", "ar_generate"] + [f"bd_generate/{p.slug()}" for p in BD_POINTS]
         + [task_case(t, m) for t, m, _ in TASKS])


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


pytestmark = pytest.mark.usefixtures("hub_offline")  # conftest: the Hub and datasets offline


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from fastdllm_core.loading import ensure_mask_token, load_model
    from fastdllm_core.synthetic import write_suite
    from fastdllm_core.tiny import bpe_tokenizer, tiny_model, tiny_qwen2_config
    from fastdllm_core.training import data as data_mod
    from fastdllm_core.training.model_init import init_mask_embedding, tokenizer_texts

    root = tmp_path_factory.mktemp("numerics_eval")
    suite = write_suite(root / "suite", **SUITE)
    tok = bpe_tokenizer(tokenizer_texts(data_mod.read_jsonl(suite["pretrain"])), 768)
    config = tiny_qwen2_config(vocab_size=-(-len(tok) // 8) * 8, hidden_size=64, layers=2, heads=4, kv_heads=2,
                               initializer_range=0.3)
    model = tiny_model(config, seed=0, dtype=torch.float64)
    mask_id = ensure_mask_token(tok, model)
    init_mask_embedding(model, mask_id)
    with torch.no_grad():
        model.model.norm.weight.mul_(16.0)
        model.get_input_embeddings().weight[tok.convert_tokens_to_ids("<|im_end|>")].mul_(2.0)
    model.save_pretrained(root / "ck")
    tok.save_pretrained(root / "ck")
    lm = load_model(str(root / "ck"), dtype=torch.float64)
    return lm, suite, root


@pytest.fixture(scope="module")
def prompts(setup):
    """Chat-formatted user turns of the suite (two arithmetic, one multiple choice) and the first one cut to 32
    tokens: every prompt is at least a block long, so the first block is prefilled, and one ends on a block
    boundary (its first token comes from the prefill's last logit)."""
    from fastdllm_core.synthetic import user_prompts

    lm, suite, _ = setup
    texts = (user_prompts("synth_arith", suite["synth_arith_test"])[:2]
             + user_prompts("synth_mc", suite["synth_mc_test"])[:1])
    enc = [lm.tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                            tokenize=True) for t in texts]
    enc = [list(e["input_ids"] if hasattr(e, "keys") else e) for e in enc]
    enc.append(enc[0][:32])
    assert min(len(e) for e in enc) == 32, [len(e) for e in enc]
    return enc


def test_checkpoint(setup, request):
    lm, _, _ = setup
    nc.check(request.config, STORE, "checkpoint", {
        "tokenizer": nc.tokenizer_fingerprint(lm.tokenizer), "mask_id": lm.mask_token_id,
        "eos_ids": lm.eos_token_ids, "weights_sha256": nc.weights_sha256(nc.named_weights(lm.model))})


def test_prompts(prompts, request):
    nc.check(request.config, STORE, "prompts", {"lengths": [len(p) for p in prompts],
                                                "sha256": nc.sha256_json(prompts)})


def test_ar_generate(setup, prompts, request):
    from fastdllm_core.decoding import ar_generate

    lm, _, _ = setup
    out = ar_generate(lm.model, prompts, stop_token_ids=lm.eos_token_ids, max_new_tokens=MAX_NEW,
                      pad_token_id=lm.tokenizer.pad_token_id)
    nc.check(request.config, STORE, "ar_generate", {
        **{f"row {i}": seq for i, seq in enumerate(out.sequences)},
        "generated_tokens": out.stats.generated_tokens, "nfe": out.stats.nfe})


@pytest.mark.parametrize("point", BD_POINTS, ids=lambda p: p.slug())
def test_bd_generate(setup, prompts, point, request):
    from fastdllm_core.decoding import bd_generate

    lm, _, _ = setup
    out = bd_generate(lm.model, prompts, mask_token_id=lm.mask_token_id, stop_token_ids=lm.eos_token_ids,
                      config=point)
    s = out.stats
    nc.check(request.config, STORE, f"bd_generate/{point.slug()}", {
        **{f"row {i}": seq for i, seq in enumerate(out.sequences)},
        "generated_tokens": s.generated_tokens, "nfe": s.nfe, "nfe_breakdown": s.nfe_breakdown,
        "row_nfe": s.row_nfe, "steps_per_block": s.steps_per_block})


def _item(task: str, s: dict) -> dict:
    """What an item pins: its sha256 (prompt, output, extraction, score), and for multiple choice the option
    log-likelihoods (with a tolerance) and the option they pick."""
    if task == "synth_mc":
        ll = [float(r[0][0]) for r in s["raw_output"]]
        keep = {k: s[k] for k in ("doc_id", "prompt", "target", "correct")}
        keep["picked"] = max(range(len(ll)), key=ll.__getitem__)
        keep["is_greedy"] = [bool(r[0][1]) for r in s["raw_output"]]
        return {"sha256": nc.sha256_json(keep), "picked": keep["picked"], "loglik": ll}
    return {"sha256": nc.sha256_json(s)}


@pytest.mark.parametrize("task,mode,limit", TASKS, ids=[f"{t}-{m}" for t, m, _ in TASKS])
def test_run_task(setup, tmp_path, task, mode, limit, request):
    from fastdllm_core.evaluation import run_task

    lm, suite, _ = setup
    rows = run_task(lm, task, mode=mode, decode=ACCURACY_POINT, batch_size=4, limit=limit, out_dir=tmp_path,
                    data_path=suite[f"{task}_test"], code_opts={"min_time_limit": 0.2})
    samples = [json.loads(line) for line in open(tmp_path / "samples.jsonl")]
    first = rows[0]
    nc.check(request.config, STORE, task_case(task, mode), {
        "metrics": {r["metric"]: [r["value"], r["n"], r["status"]] for r in rows},
        "total_tokens": first["total_tokens"], "nfe": first["nfe"],
        "items": {f"item {i}": _item(task, s) for i, s in enumerate(samples)}})


def test_stored_cases_are_the_tests_cases(request):
    nc.check_cases(request.config, STORE, CASES)
