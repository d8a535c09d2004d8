"""``fastdllm generate`` on a tiny random checkpoint (CPU)."""
from __future__ import annotations

import json

import pytest

from fastdllm_core.cli import generate as generate_cli
from fastdllm_core.decoding import bd_generate
from fastdllm_core.loading import load_model
from fastdllm_core.tiny import write_tiny_checkpoint


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return str(write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "ck", seed=3))


def _json(capsys, argv):
    assert generate_cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_bd_json_matches_the_decoder(ckpt, capsys):
    doc = _json(capsys, ["--model", ckpt, "--prompt", "Hello", "--max-new-tokens", "40", "--threshold", "0.7",
                         "--json"])
    lm = load_model(ckpt)
    ids = lm.tokenizer.apply_chat_template([{"role": "user", "content": "Hello"}], add_generation_prompt=True,
                                           tokenize=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    ref = bd_generate(lm.model, [list(ids)], mask_token_id=lm.mask_token_id, stop_token_ids=lm.eos_token_ids,
                      max_new_tokens=40, threshold=0.7)
    o = doc["outputs"][0]
    assert o["prompt_ids"] == list(ids)  # chat template on by default (the tokenizer has one)
    assert o["token_ids"] == ref.sequences[0]
    assert o["text"] == lm.tokenizer.decode(ref.sequences[0], skip_special_tokens=True)
    st = doc["stats"]
    for key in ("generated_tokens", "nfe", "tokens_per_forward", "wall_time_s", "row_latency_s", "steps_per_block",
                "host_syncs"):
        assert key in st
    assert st["generated_tokens"] == [len(o["token_ids"])] and st["steps_per_block"]
    assert doc["mode"] == "bd" and doc["decode_config"]["threshold"] == 0.7


def test_ar_mode_and_prompts_file(ckpt, capsys, tmp_path):
    pf = tmp_path / "p.txt"
    pf.write_text("first prompt\nsecond one\n")
    doc = _json(capsys, ["--model", ckpt, "--prompts", str(pf), "--mode", "ar", "--max-new-tokens", "12", "--no-chat",
                         "--ignore-eos", "--json"])
    assert doc["mode"] == "ar" and doc["baseline"] == "hf"
    assert [o["prompt"] for o in doc["outputs"]] == ["first prompt", "second one"]
    assert [len(o["token_ids"]) for o in doc["outputs"]] == [12, 12]
    assert doc["stats"]["tokens_per_forward"] == 1.0 and doc["stats"]["mode"] == "ar_hf"
    lm = load_model(ckpt)
    assert doc["outputs"][0]["prompt_ids"] == lm.tokenizer.encode("first prompt", add_special_tokens=False)  # --no-chat


def test_plain_text_output(ckpt, capsys):
    assert generate_cli.main(["--model", ckpt, "--prompt", "Hi", "--max-new-tokens", "8", "--ignore-eos",
                              "--sub-block-cache"]) == 0
    cap = capsys.readouterr()
    assert cap.out.endswith("\n") and len(cap.out) >= 2 and "tokens/forward" in cap.err and "[bd] 8 tokens" in cap.err


@pytest.mark.parametrize("argv, msg", [
    (["--threshold", "0"], "threshold must be in (0, 1]"),
    (["--sub-block-size", "5"], "sub_block_size=5 must divide block_size=32"),
    (["--max-new-tokens", "0"], "max_new_tokens must be a positive integer"),
    (["--mode", "ar", "--temperature", "0.5"], "--temperature 0.5"),
])
def test_bad_options_fail_before_loading(argv, msg, capsys, tmp_path):
    rc = generate_cli.main(["--model", str(tmp_path / "missing"), "--prompt", "x", *argv])
    assert rc == 2 and msg in capsys.readouterr().err


def test_missing_model_is_a_clear_error(capsys, tmp_path):
    assert generate_cli.main(["--model", str(tmp_path / "nope"), "--prompt", "x"]) == 2
    assert "nope" in capsys.readouterr().err
