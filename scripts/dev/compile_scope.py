"""The compiled path's two compile scopes side by side (fastdllm_core/decoding/static.py): compile time, tokens and
speed of block diffusion and AR on 'model' (the whole forward compiled per shape) and 'layers' (the decoder layer
compiled once per shape for all layers), against the eager path, on a random Qwen2 of real depth and small width.

    python scripts/dev/compile_scope.py --layers 28 --out /tmp/compile_scope.csv

Depth, not width, sets the compile time (Dynamo traces and Inductor lowers every layer of a whole-forward graph), so
a 28-layer model of width 112 stands for the compile cost of the Qwen2.5-1.5B and 7B shapes (28 layers each); its
speeds are a CPU's, not a GPU's.  One process, one thread, a fresh Inductor cache (cold compiles, as on a fresh
machine; TORCHINDUCTOR_CACHE_DIR set to keep one); the rows say what ran.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="compile_scope_"))
import torch  # noqa: E402  (after the cache directory is chosen)


def _model(layers: int, dtype: torch.dtype):
    from fastdllm_core.tiny import tiny_model, tiny_qwen2_config

    cfg = tiny_qwen2_config(vocab_size=1024, hidden_size=112, layers=layers, heads=28, kv_heads=4,
                            intermediate_size=256, initializer_range=0.3)
    model = tiny_model(cfg, seed=0, dtype=dtype, attn_implementation="sdpa")
    model.config.mask_token_id = 3
    return model


def _decode(model, mode: str, path: str, prompts, new: int):
    from fastdllm_core.decoding import ar_generate, bd_generate

    if mode == "ar":
        return ar_generate(model, prompts, stop_token_ids=[], max_new_tokens=new, baseline=path)
    return bd_generate(model, prompts, mask_token_id=3, stop_token_ids=[], max_new_tokens=new, block_size=32,
                       sub_block_size=8, threshold=0.9, decode_path=path)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--new", type=int, default=64, help="new tokens per prompt")
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    from fastdllm_core.provenance import hardware, write_csv_atomic

    torch.set_num_threads(1)
    model = _model(a.layers, getattr(torch, a.dtype))
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(4, 1024, (40,), generator=g).tolist() for _ in range(a.batch)]
    rows = []
    for mode, eager in (("ar", "hf"), ("bd", "eager")):
        ref = _decode(model, mode, eager, prompts, a.new)
        for scope in ("eager", "model", "layers"):
            os.environ["FASTDLLM_COMPILE_SCOPE"] = "model" if scope == "eager" else scope
            path = eager if scope == "eager" else "compiled"
            t0 = time.perf_counter()
            first = _decode(model, mode, path, prompts, a.new)
            t1 = time.perf_counter()
            again = _decode(model, mode, path, prompts, a.new)
            t2 = time.perf_counter()
            tokens = sum(map(len, again.sequences))
            rows.append(dict(mode=mode, scope=scope, layers=a.layers, batch=a.batch, dtype=a.dtype,
                             compile_s=round(first.stats.capture_time_s, 2), first_call_s=round(t1 - t0, 2),
                             tokens_per_s=round(tokens / (t2 - t1), 1), nfe=again.stats.nfe,
                             same_tokens_as_eager=first.sequences == ref.sequences == again.sequences,
                             **hardware("cpu"), torch=torch.__version__))
            print(rows[-1], flush=True)
    write_csv_atomic(a.out, rows)


if __name__ == "__main__":
    main()
