"""A base a study built, in bf16: every floating tensor of the checkpoint rounded to bfloat16 (what the study scores,
adapts and releases; loaded back in the job's dtype, float32 on a CPU)."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    import json
    import shutil
    from pathlib import Path

    import torch
    from safetensors.torch import load_file, save_file

    src, out = Path(sm.input[0]), Path(sm.output[0])
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("model.safetensors", "*.pt", "optimizer*"))
    weights = load_file(src / "model.safetensors")
    save_file({k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in weights.items()},
              tmp / "model.safetensors", metadata={"format": "pt"})
    cfg = json.loads((tmp / "config.json").read_text())
    cfg.update({k: "bfloat16" for k in ("torch_dtype", "dtype") if k in cfg} or {"dtype": "bfloat16"})
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"{out}: {sum(v.numel() for v in weights.values())} parameters in bf16")
