"""Multiple choice as stated (issue 39, item 6): under the chat template lm-eval's continuation is the bare option
and the context ends with the assistant turn's line break.  The break stays in the context
(fastdllm_core.evaluation.task_common.encode_pair), so an MMLU letter is one token and the four options of a question
share one forward (block diffusion, exact masked-diffusion likelihood); GPQA's "(A)" keeps its own two tokens.
With the real Qwen2.5 tokenizer (../shared/tools/get-qwen2.5-coder-0.5b) where present, and always with the
embedded default's tokenizer."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from fastdllm_core.evaluation.task_common import encode_pair

ROOT = Path(__file__).resolve().parents[1]
GGUF = Path(os.environ.get("FASTDLLM_QWEN_GGUF",
                           Path.home() / ".cache/fastdllm/models/qwen2.5-coder-0.5b-instruct.gguf"))
QUESTION = "Which is even?\nA. 3\nB. 4\nC. 5\nD. 7\nAnswer:"

pytestmark = pytest.mark.usefixtures("hub_offline")


@pytest.fixture(scope="module")
def qwen_tokenizer():
    if not GGUF.is_file():
        pytest.skip(f"the real Qwen2.5 tokenizer: no GGUF at {GGUF} (run ../shared/tools/get-qwen2.5-coder-0.5b "
                    "or set FASTDLLM_QWEN_GGUF)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(GGUF.parent), gguf_file=GGUF.name)


def _pieces(tok, context: str, continuation: str) -> list[str]:
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    ctx, cont = encode_pair(enc, context, continuation)
    assert ctx + cont == enc(context + continuation)  # a split of the whole, nothing dropped or added
    return [tok.decode([t]) for t in cont]


def test_the_real_qwen_tokenizer_scores_the_option_alone(qwen_tokenizer):
    tok = qwen_tokenizer
    chat = tok.apply_chat_template([{"role": "user", "content": QUESTION}], tokenize=False, add_generation_prompt=True)
    assert chat.endswith("<|im_start|>assistant\n")
    assert [_pieces(tok, chat, letter) for letter in "ABCD"] == [["A"], ["B"], ["C"], ["D"]]  # MMLU
    assert _pieces(tok, chat, "(A)") == ["(A", ")"]  # GPQA: 2 tokens, 3 mask patterns under the exact likelihood
    # what lm-eval's own split gives (the break moved onto the option): the departure this fixes
    assert [tok.decode([t]) for t in tok.encode("\n" + "A", add_special_tokens=False)] == ["\n", "A"]
    # plain text keeps lm-eval's convention: a trailing space goes with the option (" A" is one token)
    assert _pieces(tok, "Answer:", " A") == [" A"] and _pieces(tok, "Answer: ", "A") == [" A"]


def test_the_default_tokenizer_scores_the_option_alone():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ROOT / "results" / "released" / "tiny_ar_base")
    chat = tok.apply_chat_template([{"role": "user", "content": QUESTION}], tokenize=False, add_generation_prompt=True)
    assert [_pieces(tok, chat, letter) for letter in "ABCD"] == [["A"], ["B"], ["C"], ["D"]]


def _requests(tok, n_questions: int = 2):
    from lm_eval.api.instance import Instance

    out = []
    for q in range(n_questions):
        chat = tok.apply_chat_template([{"role": "user", "content": f"{q}: {QUESTION}"}], tokenize=False,
                                       add_generation_prompt=True)
        out += [Instance("loglikelihood", {}, (chat, letter), idx=i, metadata=("mc", q, 1))
                for i, letter in enumerate("ABCD")]
    return out


@pytest.mark.parametrize("family", ["bd", "dream"])
def test_the_options_of_a_question_share_one_forward_through_lm_eval(tmp_path, family):
    """lm-eval's loglikelihood path (strings in, chat template on): 4 one-token options, one forward a question."""
    from fastdllm_core.evaluation.lm_model import FastDLLMv2
    from fastdllm_core.loading import load_model

    if family == "bd":
        model = load_model(str(ROOT / "results" / "released" / "tiny_ar_base"))
        kw = {"mode": "bd"}
    else:
        from fastdllm_core.modeling import dream

        model = load_model(str(dream.write_standin(tmp_path / "dream", seed=6)))
        kw = {"mode": "dream", "max_new_tokens": 8, "loglikelihood_method": "auto", "mc_num": 128}
    lm = FastDLLMv2(model=model, **kw)
    calls = []
    hook = model.model.register_forward_hook(lambda *a: calls.append(1))
    try:
        scores = lm.loglikelihood(_requests(model.tokenizer), disable_tqdm=True)
    finally:
        hook.remove()
    assert len(calls) == 2 and len(scores) == 8  # two questions
    assert lm.ll_method_used == ("exact" if family == "dream" else "chain")
