"""scripts/dev/speed_probe.py and speed_accuracy.py: the forward accounting, the instrumented decoder (the library's
numerics, every forward recorded) and the paired test."""
import importlib.util
from pathlib import Path

import pytest

DEV = Path(__file__).resolve().parents[1] / "scripts" / "dev"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, DEV / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


probe = _load("speed_probe")
speed_accuracy = _load("speed_accuracy")


def test_split_forwards_counts_the_forwards_after_the_answer():
    events = [("prefill", []), ("first_fill", [42]), ("step", [43, 44]), ("step", [45]), ("step", [46, 47, 48]),
              ("commit", [])]
    got = probe.split_forwards(events, 42, 4)  # answer = positions 42..45, complete after the 2nd step
    assert got == dict(fwd_to_answer=3, fwd_after_answer=2, steps=3, pos=6, steps_in=2, pos_in=3)
    got = probe.split_forwards(events, 42, 7)  # complete after the 3rd step: nothing after but the commit
    assert (got["fwd_to_answer"], got["fwd_after_answer"], got["pos_in"]) == (4, 1, 6)


@pytest.mark.parametrize("rule", ["fill_block", "stop"])
def test_probe_decoder_equals_bd_generate(rule):
    import torch

    from fastdllm_core.bench import load_bench_model
    from fastdllm_core.config import DecodeConfig
    from fastdllm_core.decoding import bd_generate

    bm = load_bench_model("random:tiny", seed=3)
    with torch.no_grad():
        bm.model.model.embed_tokens.weight.normal_(0, 0.5)  # a context-dependent argmax, a spread of confidences
    stops = [int(t) for t in bm.stop_token_ids] + [5, 6, 7]  # frequent stop ids: rows end inside the budget
    cfg = DecodeConfig(block_size=8, sub_block_size=4, threshold=0.3, use_sub_block_cache=True, max_new_tokens=20,
                       eos_rule=rule)
    for prompt in ([1, 2, 3, 4, 9, 10, 11, 12, 13, 14], [3, 4, 5]):
        ref = bd_generate(bm.model, [prompt], mask_token_id=bm.mask_token_id, stop_token_ids=stops, config=cfg)
        seq, events, _, nfe = probe.decode_one(bm.model, prompt, bm.mask_token_id, stops, cfg)
        assert seq == ref.sequences[0] and nfe == ref.stats.nfe
        unmasked = sorted(p for _, new in events for p in new)
        assert len(unmasked) == len(set(unmasked))  # a position is unmasked once
        assert set(range(len(prompt), len(prompt) + len(seq))) <= set(unmasked)


def test_mcnemar_exact():
    assert speed_accuracy.mcnemar_p(0, 0) == 1.0
    assert speed_accuracy.mcnemar_p(17, 1) == pytest.approx(2 * 19 / 2 ** 18)
    assert speed_accuracy.mcnemar_p(5, 5) == 1.0


def test_bench_order_measures_the_models_in_the_order_given(tmp_path, tiny_bench_inputs):
    """scripts/dev/bench_order.py (the drift check behind README's Speed bullet): every named checkpoint measured
    at every batch size in the given order, through the sweep job's own measurement; bad names refused first."""
    import csv

    order = _load("bench_order")
    ck, prompts = tiny_bench_inputs
    with pytest.raises(SystemExit, match="--order names 'c', not one of"):
        order.main(["--model", f"a={ck}", "--order", "a", "c", "--prompts-path", str(prompts)])
    with pytest.raises(SystemExit, match="no config.json there"):
        order.main(["--model", f"a={tmp_path}", "--order", "a", "--prompts-path", str(prompts)])
    out = tmp_path / "order.csv"
    order.main(["--model", f"a={ck}", "--model", f"bd={ck}", "--order", "a", "bd", "a", "--prompts-path",
                str(prompts), "--batch-sizes", "1", "2", "--out", str(out)])
    rows = list(csv.DictReader(open(out)))
    assert [(r["model"], r["position"], r["batch_size"]) for r in rows] == [
        ("a", "0", "1"), ("a", "0", "2"), ("bd", "1", "1"), ("bd", "1", "2"), ("a", "2", "1"), ("a", "2", "2")]
    assert all(float(r["seconds_min"]) > 0 and int(r["tokens"]) > 0 for r in rows)
