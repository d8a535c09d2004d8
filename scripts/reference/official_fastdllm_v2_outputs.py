"""Write the official Fast-dLLM v2 ``batch_sample`` outputs on the project's Fast_dLLM_Qwen stand-in as test data.

    python scripts/reference/official_fastdllm_v2_outputs.py --fastdllm-repo DIR [--out tests/data/official_dllm]

``--fastdllm-repo``: a clone (or bare git directory) of NVlabs/Fast-dLLM, or of a fork, that holds commit
:data:`FASTDLLM_V2_COMMIT`; ``v2/generation_functions.py`` is read at that commit (``git show``) into a temporary
directory and imported from there.  Nothing of it is written out: only token ids, the commit and the versions.

What runs: the official ``Fast_dLLM_QwenForCausalLM.batch_sample`` (the whole decode loop: prefill, blocks,
sub-blocks, threshold unmasking, its EOS handling, dropping finished rows) bound to :class:`ReleasedForward`, an
object with the released model's ``forward`` keywords (``update_past_key_values``, ``use_block_cache``,
``block_past_key_values``, ``replace_position``) and its greedy ``sample_with_top_p`` (softmax, argmax; the forward
gives [MASK] no mass, see :meth:`ReleasedForward.sample_with_top_p`).  The forwards themselves are the
stand-in's Qwen2 forwards under the block-diffusion inference mask (``fastdllm_core.masks``, a
:class:`~fastdllm_core.decoding.forwards.BlockKVCache`): the released
``modeling.py`` lives on the Hugging Face Hub (Efficient-Large-Model/Fast_dLLM_v2_7B), which this machine cannot
reach, so what the data pins is the official *decode loop*, the part where the EOS rule lives.  The loop needs no
particular transformers version (it imports only ``transformers.utils``; ``auto_docstring`` is made the identity
while it is imported); this project's environment runs it.

``tests/test_fastdllm_v2_agreement.py`` runs the project's decoder on the same cases
(``tests/fastdllm_v2_cases.py``).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the cases module (a site-packages "tests" package may exist)

import torch  # noqa: E402

from fastdllm_core.decoding.forwards import BlockKVCache  # noqa: E402
from fastdllm_core.masks import attention_kwargs, inference_spec  # noqa: E402
from fastdllm_v2_cases import (  # noqa: E402
    BLOCK,
    CASES,
    MAX_NEW,
    STANDIN_SEED,
    STOP_ID,
    WEIGHT_STD,
    prompt_ids,
    sharpen,
)

# NVlabs/Fast-dLLM main, 2026-01-28 ("update news"): v2/generation_functions.py as of "fix bug" (2025-11-28)
FASTDLLM_V2_COMMIT = "af42f511f705a2db0d16aa63ebcfcbc26f29181d"
SOURCE = "v2/generation_functions.py"


def load_batch_sample(repo: str, tmp: Path):
    """The official ``batch_sample`` function, imported from ``SOURCE`` at the pinned commit."""
    try:
        text = subprocess.run(["git", "-C", repo, "show", f"{FASTDLLM_V2_COMMIT}:{SOURCE}"], check=True,
                              capture_output=True, text=True).stdout
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        sys.exit(f"{repo}: cannot read {SOURCE} at commit {FASTDLLM_V2_COMMIT} ({exc}); clone NVlabs/Fast-dLLM")
    path = tmp / "fastdllm_v2_generation_functions.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("fastdllm_v2_generation_functions", path)
    mod = importlib.util.module_from_spec(spec)
    import transformers.utils as tu

    keep = tu.auto_docstring
    tu.auto_docstring = lambda obj=None, **kw: obj if obj is not None else (lambda o: o)
    try:  # a documentation decorator that transformers >= 5 refuses on a class it does not know: identity here
        spec.loader.exec_module(mod)
    finally:
        tu.auto_docstring = keep
    return mod.Fast_dLLM_QwenForCausalLM.batch_sample


class _Cache(BlockKVCache):
    """A block KV cache with the attributes ``batch_sample`` touches when it drops finished rows."""

    key_cache = property(lambda self: self.k)
    value_cache = property(lambda self: self.v)

    def __len__(self) -> int:
        return len(self.k)


class ReleasedForward:
    """The released model's ``forward`` / ``sample_with_top_p`` interface over a stock Qwen2 model (see module
    docstring).  ``past_key_values`` holds the committed prefix (``length``); the block's own slots after it are
    the block cache (``block_past_key_values`` is the cache object itself)."""

    def __init__(self, model, block_size: int, max_len: int, mask_id: int):
        self.model, self.D, self.max_len, self.mask_id = model, block_size, max_len, mask_id
        self.device = model.device

    def forward(self, input_ids, use_cache=True, past_key_values=None, update_past_key_values=False,
                use_block_cache=False, block_past_key_values=None, replace_position=None, block_size=None):
        cache = block_past_key_values or past_key_values or _Cache(self.max_len)
        P, n = cache.length, input_ids.shape[1]
        start = P + (replace_position or 0) if block_past_key_values is not None else P
        visible = P + self.D if block_past_key_values is not None else P + n
        spec = inference_spec(self.D, 0) if P == 0 and n > self.D else None  # a multi-block prefill
        pos = torch.arange(start, start + n, device=self.device)[None].expand(input_ids.shape[0], -1)
        out = self.model(input_ids=input_ids, position_ids=pos, past_key_values=cache.window(start, visible),
                         use_cache=True, **attention_kwargs(self.model, spec, n, visible))
        if update_past_key_values:
            cache.length += n
        logits = out.logits.clone()
        logits[..., self.mask_id] = float("-inf")  # see sample_with_top_p
        return SimpleNamespace(logits=logits, past_key_values=cache,
                               block_past_key_values=cache if use_block_cache else None)

    def sample_with_top_p(self, logits, top_p=0.95, temperature=0.0):
        """Greedy: softmax of the logits, argmax.  The forward gives [MASK] no mass: a released checkpoint never
        predicts it, a random stand-in may, and the official loop would then write [MASK] back and never end (the
        project's decoder likewise excludes [MASK] before its softmax)."""
        if temperature > 0:
            raise ValueError("the agreement data is greedy only (temperature 0)")
        p = torch.softmax(logits, dim=-1)
        return p.argmax(dim=-1), p


def run_case(batch_sample, model, mask_id: int, pad_id: int, case: dict) -> list[dict]:
    prompts = prompt_ids(case)
    lens = [len(p) for p in prompts]
    width = max(lens)
    ids = torch.full((len(prompts), width), mask_id, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, :len(p)] = torch.tensor(p)
    fwd = ReleasedForward(model, BLOCK, max_len=width + MAX_NEW + 4 * BLOCK, mask_id=mask_id)
    out = batch_sample(fwd, ids, tokenizer=SimpleNamespace(pad_token_id=pad_id), block_size=BLOCK,
                       max_new_tokens=MAX_NEW, small_block_size=case["sub_block_size"], min_len=min(lens),
                       seq_len=torch.tensor(lens), mask_id=mask_id, threshold=case["threshold"], stop_token=STOP_ID,
                       use_block_cache=False, temperature=0.0)
    rows = []
    for i, n in enumerate(lens):
        gen = out[i][n:].tolist()
        eos = STOP_ID in gen
        rows.append({"prompt_len": n, "eos": eos, "tokens": gen[: gen.index(STOP_ID) + 1] if eos else gen})
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fastdllm-repo", required=True)
    ap.add_argument("--out", default=str(ROOT / "tests/data/official_dllm"))
    ap.add_argument("--only", help="run the cases whose name contains this (a trial; the JSON is not written)")
    args = ap.parse_args(argv)
    import transformers

    from fastdllm_core.loading import load_model
    from fastdllm_core.rehearsal import write_standin_model

    with tempfile.TemporaryDirectory() as tmp:
        batch_sample = load_batch_sample(args.fastdllm_repo, Path(tmp))
        path = write_standin_model(Path(tmp) / "standin", "fast_dllm", seed=STANDIN_SEED, bd_size=BLOCK)
        lm = load_model(str(path), dtype=torch.float64, attn_implementation="sdpa")
        sharpen(lm.model)
        pad = lm.tokenizer.pad_token_id
        cases = {}
        for c in CASES:
            if args.only and args.only not in c["name"]:
                continue
            cases[c["name"]] = {"rows": run_case(batch_sample, lm.model, lm.mask_token_id, pad, c)}
            print(c["name"], [len(r["tokens"]) if r["eos"] else "no-eos" for r in cases[c["name"]]["rows"]],
                  flush=True)
    if args.only:
        return
    data = {"about": "token ids of the official Fast-dLLM v2 batch_sample decode loop on the Fast_dLLM_Qwen "
                     "stand-in (float64; scripts/reference/official_fastdllm_v2_outputs.py); tokens: generated ids up "
                     "to and including the first stop id",
            "commit": FASTDLLM_V2_COMMIT, "source": SOURCE, "stop_id": STOP_ID, "max_new_tokens": MAX_NEW,
            "standin_seed": STANDIN_SEED, "weight_std": WEIGHT_STD,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__}, "cases": cases}
    out = Path(args.out) / "official_fastdllm_v2.json"
    out.write_text(json.dumps(data, indent=1) + "\n")
    n_eos = sum(r["eos"] for c in cases.values() for r in c["rows"])
    print(f"wrote {out}: {len(cases)} cases, {n_eos} rows ending in the stop id")


if __name__ == "__main__":
    main()
