"""Loading stock ``transformers`` causal LMs for block diffusion (no vendored modeling code, no remote code).

Sources: a Hugging Face Hub id, a local directory, or a GGUF file (``path/to/model.gguf``).  Released
Fast-dLLM v2 checkpoints (``model_type: Fast_dLLM_Qwen``, ``bd_size``) are plain Qwen2 weights: their config is
rewritten to a :class:`~transformers.Qwen2Config` and ``bd_size`` becomes the default block size.  Released
masked-diffusion checkpoints load onto stock classes too (:mod:`fastdllm_core.modeling`): LLaDA
(``model_type: llada``) as :class:`~transformers.LlamaForCausalLM` with its weights renamed, Dream
(``model_type: Dream``) as :class:`~transformers.Qwen2ForCausalLM`; their own mask token and end-of-turn ids are
used.  :attr:`LoadedModel.family` says what was loaded (autoregressive, block diffusion, masked diffusion with or
without the logit shift).
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .decode_config import BLOCK_SIZE
from .hub_access import hub_guard
from .modeling import FAMILIES, Family, release_of
from .vocab import MASK_TOKEN

log = logging.getLogger(__name__)

# remote-code tokenizer classes of released checkpoints -> the stock class they copy (Dream's DreamTokenizer is
# Qwen2's byte-level BPE, vocab.json + merges.txt)
REMOTE_TOKENIZERS = {"DreamTokenizer": "Qwen2Tokenizer"}
FAST_DLLM_MODEL_TYPES = {"Fast_dLLM_Qwen": "qwen2"}
DEFAULT_BLOCK_SIZE = BLOCK_SIZE  # when a checkpoint has no bd_size


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    mask_token_id: int
    eos_token_ids: list[int]
    block_size: int = DEFAULT_BLOCK_SIZE  # the checkpoint's bd_size when it has one
    source: str = ""
    info: dict = field(default_factory=dict)
    family: Family = FAMILIES["qwen2"]  # AR / block diffusion / masked diffusion (with or without the logit shift)


def resolve_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    """'auto' -> bf16 on CUDA, fp32 elsewhere."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16, "float64": torch.float64, "fp64": torch.float64}
    if dtype not in table:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(table)} or 'auto'")
    return table[dtype]


def default_attn_implementation(device: str) -> str:
    """Flex attention on CUDA, dense SDPA elsewhere."""
    return "flex_attention" if str(device).startswith("cuda") else "sdpa"


def _split_gguf(source: str) -> tuple[str, str | None]:
    if source.endswith(".gguf"):
        p = Path(source)
        if not p.is_file():
            raise FileNotFoundError(f"GGUF file not found: {source}")
        return str(p.parent), p.name
    return source, None


def read_config_dict(source: str) -> dict | None:
    """The raw config.json of a local directory (None for Hub ids / GGUF: transformers resolves those)."""
    cfg = Path(source) / "config.json"
    if cfg.is_file():
        return json.loads(cfg.read_text())
    return None


def load_config(source: str, **kw):
    """A transformers config; Fast_dLLM_Qwen configs come back as Qwen2Config with ``bd_size`` kept."""
    from transformers import AutoConfig, PretrainedConfig

    raw = read_config_dict(source)
    if raw is None and not os.path.isdir(source):
        raw, _ = PretrainedConfig.get_config_dict(source, **kw)
    release = release_of(raw)
    if release == "llada":
        from .modeling import llada

        return llada.hf_config(raw)
    if release == "dream":
        from .modeling import dream

        return dream.hf_config(raw)
    if release == "llada_moe":
        from .modeling import llada_moe

        return llada_moe.hf_config(raw)
    if raw is not None and raw.get("model_type") in FAST_DLLM_MODEL_TYPES:
        from transformers import CONFIG_MAPPING

        raw = dict(raw)
        raw["model_type"] = FAST_DLLM_MODEL_TYPES[raw["model_type"]]
        raw.pop("auto_map", None)
        raw["architectures"] = ["Qwen2ForCausalLM"]
        return CONFIG_MAPPING[raw["model_type"]].from_dict(raw)
    return AutoConfig.from_pretrained(source, **kw)


def ensure_mask_token(tokenizer, model=None, mask_token: str = MASK_TOKEN, allow_resize: bool = True) -> int:
    """Make ``mask_token`` a single special token and return its id.

    Qwen2.5 tokenizers give ``|<MASK>|`` the id 151665, inside the padded embedding table (no resize).  The
    embeddings are resized only when the id falls outside the table.
    """
    vocab = tokenizer.get_vocab()
    if mask_token not in vocab:
        from tokenizers import AddedToken

        try:
            tokenizer.add_tokens([AddedToken(mask_token, special=True, normalized=False)], special_tokens=True)
        except Exception as exc:  # noqa: BLE001 - re-raised with context
            raise ValueError(f"tokenizer {type(tokenizer).__name__} cannot take the mask token {mask_token!r}: "
                             f"{exc}") from exc
    mask_id = tokenizer.convert_tokens_to_ids(mask_token)
    encoded = tokenizer.encode(mask_token, add_special_tokens=False)
    if mask_id is None or encoded != [mask_id]:
        raise ValueError(
            f"tokenizer {type(tokenizer).__name__} cannot take the mask token {mask_token!r} as one token "
            f"(it encodes to {encoded}, id {mask_id})"
        )
    if model is not None:
        n_emb = model.get_input_embeddings().num_embeddings
        if mask_id >= n_emb:
            if not allow_resize:
                raise ValueError(f"mask token id {mask_id} is outside the embedding table ({n_emb}) "
                                 "and resizing is off")
            log.warning("resizing embeddings %d -> %d for the mask token", n_emb, mask_id + 1)
            model.resize_token_embeddings(mask_id + 1, pad_to_multiple_of=64)
        model.config.mask_token_id = mask_id
    return mask_id


def eos_ids(tokenizer, model=None, extra_tokens=("<|im_end|>",)) -> list[int]:
    """Stop ids: the generation config's eos ids (``<|im_end|>`` for Qwen2.5-Instruct), the tokenizer's, and those
    of ``extra_tokens`` the vocabulary has (LLaDA's ``<|eot_id|>``, Dream's ``<|im_end|>``)."""
    ids: list[int] = []
    gen = getattr(model, "generation_config", None) if model is not None else None
    vocab = tokenizer.get_vocab()
    for cand in (getattr(gen, "eos_token_id", None), tokenizer.eos_token_id,
                 *(tokenizer.convert_tokens_to_ids(t) for t in extra_tokens if t in vocab)):
        for i in (cand if isinstance(cand, (list, tuple)) else [cand]):
            if i is not None and i not in ids:
                ids.append(int(i))
    return ids


def _load_tokenizer(directory: str, gguf_file: str | None, kw: dict):
    """AutoTokenizer, except for a plain ``tokenizers`` backend (the tiny character tokenizer): AutoTokenizer
    would pick the model type's class (Qwen2Tokenizer) and re-normalise it, dropping whitespace tokens."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tc = Path(directory) / "tokenizer_config.json"
    if not gguf_file and tc.is_file():
        cls = json.loads(tc.read_text()).get("tokenizer_class")
        if cls in ("TokenizersBackend", "PreTrainedTokenizerFast"):
            return PreTrainedTokenizerFast.from_pretrained(directory, local_files_only=kw.get("local_files_only"))
        if cls in REMOTE_TOKENIZERS:  # a remote-code class that is a stock tokenizer under another name
            import transformers

            return getattr(transformers, REMOTE_TOKENIZERS[cls]).from_pretrained(
                directory, local_files_only=kw.get("local_files_only"))
    return AutoTokenizer.from_pretrained(directory, **kw)


def load_model(
    source: str,
    *,
    device: str = "cpu",
    dtype: str | torch.dtype | None = "auto",
    attn_implementation: str | None = None,
    block_size: int | None = None,
    mask_token: str = MASK_TOKEN,
    local_files_only: bool | None = None,
) -> LoadedModel:
    """Load model and tokenizer from a Hub id, a local directory or a ``.gguf`` file.

    ``block_size`` overrides the checkpoint's ``bd_size`` (default
    :data:`~fastdllm_core.decode_config.BLOCK_SIZE` when it has none).  Set ``HF_HUB_OFFLINE=1`` (or
    ``local_files_only=True``) on machines without internet.
    """
    if not source:
        raise ValueError("model source is empty: give a Hub id, a local directory or a .gguf file")
    if local_files_only is None:
        local_files_only = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false")
    torch_dtype = resolve_dtype(dtype, device)
    attn = attn_implementation or default_attn_implementation(device)
    directory, gguf_file = _split_gguf(source)
    kw = {"local_files_only": local_files_only}
    with hub_guard(directory, "model"):  # a gated / unknown Hub id: HubAccessError naming it and the fix
        config = _source_config(directory, gguf_file, kw)
        tok_kw = dict(kw, trust_remote_code=False)
        if config is not None:
            tok_kw["config"] = config  # never let AutoTokenizer look at a remote-code config.json
        tokenizer = _load_tokenizer(directory, gguf_file, tok_kw)
        release = getattr(config, "released_model_type", None) if config is not None else None
        model = _load_weights(directory, config, release, dict(kw, dtype=torch_dtype, attn_implementation=attn,
                                                               trust_remote_code=False))
    model.to(device).eval()
    family = _family(model.config, release)
    mask_id, extra = _mask_and_stop_tokens(tokenizer, model, family, release, mask_token)
    bd = block_size or getattr(model.config, "bd_size", None) or DEFAULT_BLOCK_SIZE
    return LoadedModel(
        model=model, tokenizer=tokenizer, mask_token_id=mask_id, eos_token_ids=eos_ids(tokenizer, model, extra),
        block_size=int(bd), source=source,
        info={"dtype": str(torch_dtype).replace("torch.", ""), "attn_implementation": attn, "device": str(device),
              "gguf": bool(gguf_file), "family": family.name, "release": family.release,
              "logit_shift": family.logit_shift},
        family=family,
    )


def load_tokenizer(source: str, *, mask_token: str = MASK_TOKEN, local_files_only: bool | None = None):
    """(tokenizer, mask token id) of ``source`` as :func:`load_model` gives them, without the weights (training
    encodes its data before it loads the model).  A masked-diffusion release's mask id is its config's."""
    if local_files_only is None:
        local_files_only = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false")
    directory, gguf_file = _split_gguf(source)
    kw = {"local_files_only": local_files_only}
    with hub_guard(directory, "model"):
        config = _source_config(directory, gguf_file, kw)
        tok_kw = dict(kw, trust_remote_code=False, **({"config": config} if config is not None else {}))
        tokenizer = _load_tokenizer(directory, gguf_file, tok_kw)
    release = getattr(config, "released_model_type", None) if config is not None else None
    if config is not None and _family(config, release).masked_diffusion:
        return tokenizer, int(config.mask_token_id)
    return tokenizer, ensure_mask_token(tokenizer, None, mask_token)


def _source_config(directory: str, gguf_file: str | None, kw: dict):
    """The checkpoint's config (:func:`load_config`), or None for a ``.gguf`` file (transformers reads it from the
    file; ``gguf_file`` is added to ``kw``).  A local-looking directory that does not exist is refused."""
    if gguf_file:
        kw["gguf_file"] = gguf_file
        return None
    if not os.path.isdir(directory) and ("/" not in directory or directory.startswith((".", "/"))):
        raise FileNotFoundError(f"model directory not found: {directory}")
    return load_config(directory, **kw)


def _load_weights(directory: str, config, release: str | None, mkw: dict):
    """The model: the stock class of ``config`` with the release's weights (:func:`_from_pretrained`), or
    ``AutoModelForCausalLM`` from a ``.gguf`` file (no config)."""
    from transformers import AutoModelForCausalLM

    if config is not None:
        mkw["config"] = config
        return _from_pretrained(directory, config, release, mkw)
    return AutoModelForCausalLM.from_pretrained(directory, **mkw)


def _mask_and_stop_tokens(tokenizer, model, family: Family, release: str | None, mask_token: str) -> tuple[int, tuple]:
    """The mask token id and the extra end-of-turn tokens: a masked-diffusion release's own mask token (LLaDA 126336,
    Dream 151666, never added; full attention) and end-of-turn tokens, else ``mask_token`` made a single special
    token (:func:`ensure_mask_token`) and ``<|im_end|>``."""
    if family.masked_diffusion:  # the release's own mask token (LLaDA 126336, Dream 151666), never added
        model.config.is_causal = False  # full attention: transformers builds a bidirectional mask, never a causal one
        return _check_release_mask(tokenizer, model), _release_eos_tokens(release)
    return ensure_mask_token(tokenizer, model, mask_token), ("<|im_end|>",)


def _from_pretrained(directory: str, config, release: str | None, mkw: dict):
    """The stock class of ``config`` with the release's weights (LLaDA's renamed by its key mapping, its
    embedding / logit scales folded in)."""
    from transformers import AutoModelForCausalLM, LlamaForCausalLM, Qwen2ForCausalLM

    cls = {"qwen2": Qwen2ForCausalLM, "llama": LlamaForCausalLM}.get(getattr(config, "model_type", None))
    if release == "llada":
        from .modeling import llada

        model, info = cls.from_pretrained(directory, key_mapping=llada.KEY_MAPPING, output_loading_info=True, **mkw)
        _check_loading(directory, info)
        llada.fold_scales(model, read_config_dict(directory) or {})
        return model
    if release == "llada_moe":
        from .modeling import llada_moe

        return llada_moe.from_pretrained(directory, mkw)
    return (cls or AutoModelForCausalLM).from_pretrained(directory, **mkw)


def _check_loading(directory: str, info: dict) -> None:
    """A mapped checkpoint must fill every weight of the stock class and leave none of its own unused."""
    missing = sorted(k for k in info.get("missing_keys", ()) if k != "lm_head.weight")  # tied: no lm_head
    unexpected = sorted(info.get("unexpected_keys", ()))
    if missing or unexpected:
        raise ValueError(f"{directory}: the weight mapping left stock weights unfilled {missing[:6]} or released "
                         f"weights unused {unexpected[:6]} (fastdllm_core.modeling)")


def _family(config, release: str | None) -> Family:
    if release in ("llada", "llada_moe"):
        return FAMILIES["llada"]
    if release == "Dream":
        return FAMILIES["dream"]
    return FAMILIES["fast_dllm_v2"] if getattr(config, "bd_size", None) else FAMILIES["qwen2"]


def _release_eos_tokens(release: str | None) -> tuple:
    from .modeling import dream, llada

    return dream.EOS_TOKENS if release == "Dream" else llada.EOS_TOKENS


def _check_release_mask(tokenizer, model) -> int:
    """A masked-diffusion release's ``mask_token_id`` (from its config), checked against the embedding table."""
    mask_id = getattr(model.config, "mask_token_id", None)
    n = model.get_input_embeddings().num_embeddings
    if mask_id is None or not 0 <= int(mask_id) < n:
        raise ValueError(f"the checkpoint's mask_token_id={mask_id!r} is not inside its embedding table ({n} rows)")
    return int(mask_id)
