"""The AR baseline is plain greedy argmax whatever the checkpoint's generation_config.json says (issue 24)."""
import pytest
import torch

from conftest import make_tiny
from fastdllm_core.decoding import ar_generate
from fastdllm_core.decoding.ar import AR_GENERATION, ar_generation_summary

MASK, EOS = 3, 2


def greedy_loop(model, prompt, n, stop=None, suppress=()):
    """Argmax of a full forward per token: what greedy decoding means, nothing from any generation config."""
    ids = list(prompt)
    out = []
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids])).logits[0, -1].clone()
            for t in suppress:
                logits[t] = float("-inf")
            tok = int(logits.argmax())
            out.append(tok)
            ids.append(tok)
            if stop is not None and tok == stop:
                break
    return out


@pytest.fixture(scope="module")
def penalised():
    """A tiny Qwen2 that ships Qwen2.5-Instruct-like sampling settings, a strong repetition penalty included."""
    m = make_tiny(seed=1)
    gc = m.generation_config
    gc.repetition_penalty, gc.no_repeat_ngram_size = 1.3, 2
    gc.do_sample, gc.temperature, gc.top_p, gc.top_k = True, 0.7, 0.8, 20
    gc.eos_token_id, gc.pad_token_id = EOS, 0
    return m


def prompts():
    g = torch.Generator().manual_seed(5)
    return [torch.randint(4, 64, (n,), generator=g).tolist() for n in (4, 9, 6)]


@pytest.mark.parametrize("stop", [[], [EOS]], ids=["no_stop", "eos"])
def test_ar_generate_ignores_checkpoint_generation_config(penalised, stop):
    ps = prompts()
    out = ar_generate(penalised, ps, stop_token_ids=stop, max_new_tokens=24, suppress_token_ids=[MASK])
    want = [greedy_loop(penalised, p, 24, stop=EOS if stop else None, suppress=[MASK]) for p in ps]
    assert out.sequences == want
    # the settings matter for this model: with its own config generate repeats no token pair
    own = penalised.generate(torch.tensor([ps[0]]), max_new_tokens=24, do_sample=False, pad_token_id=0,
                             eos_token_id=None)[0, len(ps[0]):].tolist()
    assert own != want[0]
    assert penalised.generation_config.repetition_penalty == 1.3  # the model's config is left as it was
    assert penalised.generation_config.eos_token_id == EOS


def test_pinned_settings_are_recorded():
    s = ar_generation_summary()
    assert "repetition_penalty=1.0" in s and "do_sample=False" in s and "no_repeat_ngram_size=0" in s
    assert AR_GENERATION["repetition_penalty"] == 1.0 and AR_GENERATION["num_beams"] == 1


@pytest.mark.parametrize("stop", [[], [EOS]])
def test_pinned_config_passes_strict_validation(stop):
    from transformers import CompileConfig

    from fastdllm_core.decoding.ar import pinned_generation_config

    pinned_generation_config(8, stop, 0).validate(strict=True)  # no flag that greedy decoding ignores
    pinned_generation_config(8, stop, 0, cache_implementation="static", suppress_tokens=[MASK],
                             compile_config=CompileConfig(fullgraph=False)).validate(strict=True)
