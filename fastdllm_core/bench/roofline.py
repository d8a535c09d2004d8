"""Memory-bandwidth roofline for the AR baseline and the block-diffusion decoder.

At batch 1 a decoder forward is bound by reading the weights once from memory.  Per forward it reads

* every parameter matrix of the transformer layers and the final norm,
* the ``lm_head`` matrix whole (with tied embeddings that is the embedding table, read whole as the output
  projection),
* from the input embedding table only the rows of the tokens in the forward (a gather), not the whole table,
* plus the KV cache of the context (reported separately: it grows with the context).

Bound: ``tokens/s <= bandwidth / bytes_per_forward * tokens_per_forward * batch``.  For the AR baseline
``tokens_per_forward = 1``; for the diffusion decoder it is its measured tokens per forward (the same weights are
read once per forward whatever the number of tokens accepted), so its effective tokens/s is compared against the
limit times its tokens per forward.  ``fraction_of_roofline`` = measured / bound.

Bandwidth: given (``--bandwidth-gbs``), measured (a device-to-device copy on CUDA, a memory copy on CPU, counting
read + write bytes), and, for known GPUs, the vendor's specification.  CPU rows say ``bandwidth_source =
cpu_measured_copy``: a CPU roofline, not a GPU one.

    fastdllm roofline --bench results/bench.csv --out results/roofline.csv --measure-bandwidth

The roofline on two sides: this module computes it; :mod:`fastdllm_core.cli.roofline` is the command over it
(same idea, same name).
"""
from __future__ import annotations

import time

import torch

from ..intervals import finite_float
from ..provenance import NOT_AVAILABLE

# Vendor peak HBM bandwidths (GB/s, 1e9 bytes/s) by a substring of the CUDA device name; most specific first.
SPEC_BANDWIDTH_GBS = [
    ("H200", 4800.0), ("H100 NVL", 3900.0), ("H100 PCIe", 2000.0), ("H100", 3350.0),
    ("A100-SXM4-80GB", 2039.0), ("A100 80GB PCIe", 1935.0), ("A100-PCIE-40GB", 1555.0),
    ("A100-SXM4-40GB", 1555.0), ("L40S", 864.0), ("A10G", 600.0),
]
BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "float64": 8}


def spec_bandwidth(device_name: str) -> float | None:
    for key, bw in SPEC_BANDWIDTH_GBS:
        if key.lower() in (device_name or "").lower():
            return bw
    return None


def dtype_bytes(dtype) -> int:
    name = str(dtype).replace("torch.", "")
    if name not in BYTES:
        raise ValueError(f"unknown dtype {dtype!r} for the roofline; expected one of {sorted(BYTES)}")
    return BYTES[name]


def weight_traffic(model, bytes_per_param: int | None = None) -> dict:
    """Bytes of weights read per forward (see the module docstring), from a model (meta-device models work)."""
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    tied = emb is head or (emb.device.type != "meta" and emb.data_ptr() == head.data_ptr())
    params = {id(p): p for p in model.parameters()}  # shared tensors once
    total = sum(p.numel() for p in params.values())
    bpp = bytes_per_param or emb.element_size()
    # the input table is gathered (a few rows), not read; lm_head is read whole.  Tied: the table appears once in
    # parameters() and is read whole as lm_head, so every parameter counts; untied: all but the input table.
    read_params = total if tied else total - emb.numel()
    hidden = emb.shape[1]
    return {"n_params": total, "embedding_params": emb.numel(), "lm_head_params": head.numel(),
            "tied_embeddings": bool(tied), "bytes_per_param": bpp, "weight_bytes_per_forward": read_params * bpp,
            "embedding_row_bytes": hidden * bpp}


def kv_bytes(config, context_len: float, batch: int, bytes_per_el: int) -> float:
    """Bytes of KV cache read by one forward over ``context_len`` cached positions for ``batch`` rows."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * context_len * batch * bytes_per_el


def measure_bandwidth(device: str = "cpu", nbytes: int | None = None, iters: int = 10) -> float:
    """Copy bandwidth in GB/s (1e9 B/s), counting the bytes read and written: ``2 * nbytes * iters / time``."""
    dev = torch.device(device)
    nbytes = nbytes or (1 << 30 if dev.type == "cuda" else 1 << 27)
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=dev).fill_(1.0)
    dst = torch.empty_like(src)
    for _ in range(2):
        dst.copy_(src)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dst.copy_(src)
        end.record()
        torch.cuda.synchronize(dev)
        secs = start.elapsed_time(end) / 1000.0
    else:
        t0 = time.perf_counter()
        for _ in range(iters):
            dst.copy_(src)
        secs = time.perf_counter() - t0
    return 2 * src.numel() * 4 * iters / secs / 1e9


def roofline_rows(bench_rows: list[dict], traffic: dict, config, bandwidth_gbs: float, bandwidth_source: str,
                  spec_gbs: float | None = None) -> list[dict]:
    """One roofline row per bench row (AR and diffusion), against the same bandwidth."""
    out = []
    for r in bench_rows:
        tps, tpf = finite_float(r.get("tokens_per_s")), finite_float(r.get("tokens_per_forward"))
        b = int(float(r["batch_size"]))
        if tps is None or tpf is None:
            continue
        wbytes = traffic["weight_bytes_per_forward"]
        limit1 = bandwidth_gbs * 1e9 / wbytes  # forwards/s bound at batch 1, weights only
        bound = limit1 * tpf * b
        ctx = (finite_float(r.get("prompt_len_mean")) or 0.0) + (finite_float(r.get("max_new_tokens")) or 0.0) / 2
        kvb = kv_bytes(config, ctx, b, traffic["bytes_per_param"])
        bound_kv = bandwidth_gbs * 1e9 / (wbytes + kvb) * tpf * b
        row = {k: r.get(k, "") for k in ("model", "model_label", "weights", "mode", "baseline", "decode_path",
                                          "batch_size",
                                          "threshold", "sub_block_size", "use_sub_block_cache", "acceptance",
                                          "forced_k", "prompt_set", "max_new_tokens", "tokens_per_s",
                                          "tokens_per_forward", "git_commit", "device_type", "device_name")}
        row.update(
            n_params=traffic["n_params"], tied_embeddings=traffic["tied_embeddings"],
            bytes_per_param=traffic["bytes_per_param"], weight_bytes_per_forward=wbytes,
            kv_bytes_per_forward_mean=kvb, mean_context_len=ctx, bandwidth_gbs=bandwidth_gbs,
            bandwidth_source=bandwidth_source, spec_bandwidth_gbs=spec_gbs if spec_gbs else NOT_AVAILABLE,
            time_per_forward_s=1.0 / (tps / (tpf * b)), roofline_time_per_forward_s=wbytes / (bandwidth_gbs * 1e9),
            roofline_tokens_per_s=bound, fraction_of_roofline=tps / bound,
            roofline_tokens_per_s_with_kv=bound_kv, fraction_of_roofline_with_kv=tps / bound_kv,
            fraction_of_spec_roofline=(tps / (spec_gbs * 1e9 / wbytes * tpf * b)) if spec_gbs else NOT_AVAILABLE,
            note=("AR baseline: weight bytes per token / time per token vs bandwidth" if r.get("mode") == "ar"
                  else "diffusion: effective tokens/s vs bandwidth limit x tokens per forward"),
        )
        out.append(row)
    return out


def model_for_traffic(source: str, dtype: str):
    """A model skeleton for counting bytes: built on the meta device (no memory) except tiny/local configs."""
    from ..loading import load_config
    from .models import random_model

    if source.startswith("random:"):
        return random_model(source.split(":", 1)[1], device="meta", dtype=dtype).model
    from transformers import AutoModelForCausalLM

    cfg = load_config(source)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))
