"""scripts/dev/speed_probe.py and speed_accuracy.py: the forward accounting, the instrumented decoder (the library's
numerics, every forward recorded) and the paired test."""
import csv
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
    from fastdllm_core.decode_config import DecodeConfig
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
    order = _load("bench_order")
    ck, prompts = tiny_bench_inputs
    with pytest.raises(SystemExit, match="--order names 'c', not one of"):
        order.main(["--model", f"a={ck}", "--order", "a", "c", "--prompts-path", str(prompts)])
    with pytest.raises(SystemExit, match="no config.json there"):
        order.main(["--model", f"a={tmp_path}", "--order", "a", "--prompts-path", str(prompts)])
    out = tmp_path / "order.csv"
    order.main(["--model", f"a={ck}", "--model", f"bd={ck}", "--order", "a", "bd", "a", "--prompts-path",
                str(prompts), "--batch-sizes", "1", "2", "--out", str(out)])
    with out.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["model"], r["position"], r["batch_size"]) for r in rows] == [
        ("a", "0", "1"), ("a", "0", "2"), ("bd", "1", "1"), ("bd", "1", "2"), ("a", "2", "1"), ("a", "2", "2")]
    assert all(float(r["seconds_min"]) > 0 and int(r["tokens"]) > 0 for r in rows)


def test_round_ratios_divide_within_each_round():
    """scripts/dev/round_ratios.py: each row's tokens/s over the AR reference's in the same round, at the same batch
    size; bad input named; on the kept Intel run, NTP / AR base per round (the noise floor) and its median."""
    rr = _load("round_ratios")
    rows = [dict(model="ref", mode="ar", batch_size="1", status="ok", tokens_per_s_rounds="100;200",
                 speedup_vs_main_ar="1.0"),
            dict(model="m", mode="bd", batch_size="1", status="ok", tokens_per_s_rounds="50;300",
                 speedup_vs_main_ar="1.5"),
            dict(model="m", mode="bd", batch_size="4", status="ok", tokens_per_s_rounds="1;2"),
            dict(model="gone", mode="ar", batch_size="1", status="n/a", tokens_per_s_rounds="")]
    got = {(g["model"], g["batch_size"]): g for g in rr.round_ratios(rows, "ref")}
    assert set(got) == {("ref", "1"), ("m", "1")}  # no reference at batch 4; n/a rows left out
    assert got[("m", "1")]["round_ratios"] == "0.500;1.500" and got[("m", "1")]["median"] == 1.0
    assert (got[("m", "1")]["min"], got[("m", "1")]["max"], got[("m", "1")]["kept_round_ratio"]) == (0.5, 1.5, "1.5")
    with pytest.raises(SystemExit, match="--reference 'x' has no measured AR row here"):
        rr.round_ratios(rows, "x")
    with pytest.raises(SystemExit, match="row m bd batch 1: 3 rounds, the reference 2"):
        rr.round_ratios([rows[0], dict(rows[1], tokens_per_s_rounds="1;2;3")], "ref")
    with pytest.raises(SystemExit, match="row ref ar batch 1: no tokens_per_s_rounds"):
        rr.round_ratios([dict(rows[0], tokens_per_s_rounds="")], "ref")
    kept = DEV.parents[1] / "results" / "cross_cpu" / "intel_xeon_11322d2" / "throughput" / "batch.csv"
    with kept.open(newline="") as f:
        ntp = {g["batch_size"]: g for g in rr.round_ratios(list(csv.DictReader(f)), "ar_base") if g["model"] == "ntp"}
    assert ntp["1"]["round_ratios"] == "0.986;0.809;1.003" and ntp["1"]["median"] == 0.986
    assert ntp["4"]["median"] == 0.969 and float(ntp["4"]["kept_round_ratio"]) == pytest.approx(0.758, abs=1e-3)
