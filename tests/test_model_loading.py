import json

import pytest
import torch

from fastdllm_core.loading import ensure_mask_token, load_model
from fastdllm_core.tiny import tiny_qwen2_config, write_tiny_checkpoint


def test_fast_dllm_checkpoint_loads_as_plain_qwen2(tmp_path):
    write_tiny_checkpoint(tmp_path, fast_dllm_format=True, bd_size=16)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["model_type"] == "Fast_dLLM_Qwen" and "auto_map" in cfg  # the released format
    lm = load_model(str(tmp_path))
    assert type(lm.model).__name__ == "Qwen2ForCausalLM"
    assert lm.block_size == 16  # bd_size becomes the default block size
    assert lm.mask_token_id == 3 and lm.eos_token_ids == [2]
    assert load_model(str(tmp_path), block_size=8).block_size == 8
    # the weights are the ones written
    from safetensors.torch import load_file

    w = load_file(str(tmp_path / "model.safetensors"))
    torch.testing.assert_close(lm.model.model.embed_tokens.weight, w["model.embed_tokens.weight"])


def test_plain_qwen2_dir_default_block_size(tmp_path):
    write_tiny_checkpoint(tmp_path)
    lm = load_model(str(tmp_path))
    assert lm.block_size == 32 and lm.info["attn_implementation"] == "sdpa"


def test_mask_token_added_and_resized_only_without_room():
    from transformers import Qwen2ForCausalLM

    from fastdllm_core.tiny import char_tokenizer

    tok = char_tokenizer()
    # a tokenizer without the mask token: it gets added as one special token
    tok2 = char_tokenizer()
    vocab_before = len(tok2)
    room = Qwen2ForCausalLM(tiny_qwen2_config(vocab_size=128))
    assert ensure_mask_token(tok2, room, "|<NEWMASK>|") == vocab_before
    assert room.get_input_embeddings().num_embeddings == 128  # inside the padded table: no resize
    small = Qwen2ForCausalLM(tiny_qwen2_config(vocab_size=len(tok)))
    new_id = ensure_mask_token(tok, small, "|<OTHERMASK>|")
    assert small.get_input_embeddings().num_embeddings > new_id  # resized because there was no room
    fresh = char_tokenizer()
    with pytest.raises(ValueError, match="resizing is off"):
        ensure_mask_token(fresh, Qwen2ForCausalLM(tiny_qwen2_config(vocab_size=len(fresh))),
                          "|<THIRD>|", allow_resize=False)


def test_missing_source():
    with pytest.raises(FileNotFoundError, match="/no/such/dir"):
        load_model("/no/such/dir")
    with pytest.raises(FileNotFoundError, match="GGUF file not found"):
        load_model("/no/such/model.gguf")
    with pytest.raises(ValueError, match="empty"):
        load_model("")


def test_unknown_dtype():
    from fastdllm_core.loading import resolve_dtype

    with pytest.raises(ValueError, match="unknown dtype 'fp7'"):
        resolve_dtype("fp7", "cpu")


def test_saved_char_tokenizer_round_trips(tmp_path):
    from fastdllm_core.tiny import char_tokenizer

    write_tiny_checkpoint(tmp_path)
    lm = load_model(str(tmp_path))
    text = "<|im_start|>user\nQ: 9 * 5 = 45\tok|<MASK>|<|im_end|>"
    assert lm.tokenizer.encode(text) == char_tokenizer().encode(text)
    assert lm.tokenizer.decode(lm.tokenizer.encode(text)) == text
