"""Write the official LLaDA / Dream / Fast-dLLM (v1) outputs on the project's tiny stand-ins as test data.

    /tmp/venv-official/bin/python scripts/reference/official_dllm_outputs.py \
        --llada-repo DIR --fastdllm-repo DIR [--out tests/data/official_dllm]

``--llada-repo``: a clone of ML-GSAI/LLaDA, ``--fastdllm-repo``: a clone of NVlabs/Fast-dLLM (a checkout or a bare
git directory; the files are read at HEAD, which must be the pinned commit).  The official code needs an older
transformers (Fast-dLLM's requirements pin 4.49.0): run this with a scratch venv, e.g.
``python -m venv /tmp/venv-official && /tmp/venv-official/bin/pip install torch==2.13.0 transformers==4.49.0
safetensors``; it imports the project from this checkout (``fastdllm_core.modeling``: the stand-in writers).

What it does: writes the seeded stand-ins of :mod:`fastdllm_core.modeling` (LLaDA and Dream in their released
formats), loads each into the official modeling code (Fast-dLLM's ``llada/model/modeling_llada.py``,
``dream/model/modeling_dream.py``; the released weight names load as they are) in float64, and records

* logits summaries of full-attention forwards (per-position sum / max / argmax and exact slices);
* the token ids of the official samplers: LLaDA's ``generate.generate`` (ML-GSAI/LLaDA), Dream's
  ``diffusion_generate`` (``dream/model/generation_utils.py``), Fast-dLLM v1 on LLaDA (``llada/generate.py``:
  ``generate``, ``generate_with_prefix_cache``, ``generate_with_dual_cache``) and on Dream
  (``generation_utils.py`` ``confidence_threshold``, ``generation_utils_block.py`` prefix / dual cache).

``tests/test_dllm_agreement.py`` loads the same stand-ins through the project's loader and compares.  Nothing of the
official code is written out: only numbers, the commits and the versions.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

LLADA_COMMIT = "b7e6c3565f194352da44b38dd12b6970597309f3"  # ML-GSAI/LLaDA
FASTDLLM_COMMIT = "24cc59e75f20a6384bae8c905965bb090b96388e"  # NVlabs/Fast-dLLM

from tests.dllm_cases import CASES, LOGIT_CASES, STANDINS, prompt_ids  # noqa: E402  (the cases, shared with the test)


def head_commit(repo: str) -> str:
    return subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def check_commit(repo: str, want: str, name: str) -> None:
    try:
        got = head_commit(repo)
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        sys.exit(f"{name}: {repo} is not a git repository ({exc}); this script wants {name} at commit {want}")
    if got != want:
        sys.exit(f"{name}: {repo} is at {got}; this script wants commit {want} (git -C {repo} checkout {want})")


def read(repo: str, path: str) -> str:
    """A file of ``repo`` at HEAD (works on bare mirrors too)."""
    return subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], check=True, capture_output=True,
                          text=True).stdout


def materialise(repo: str, files: dict[str, str], dest: Path) -> None:
    for src, dst in files.items():
        p = dest / dst
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(read(repo, src))


def load_package(name: str, directory: Path):
    spec = importlib.util.spec_from_file_location(name, directory / "__init__.py",
                                                  submodule_search_locations=[str(directory)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def official_code(llada_repo: str, fastdllm_repo: str, work: Path):
    """The official modules, imported from their files at the pinned commits."""
    materialise(fastdllm_repo, {"llada/model/modeling_llada.py": "ofl/llada_model/modeling_llada.py",
                                "llada/model/configuration_llada.py": "ofl/llada_model/configuration_llada.py",
                                "llada/generate.py": "ofl/fastdllm_llada_generate.py",
                                "dream/model/modeling_dream.py": "ofl/dream_model/modeling_dream.py",
                                "dream/model/configuration_dream.py": "ofl/dream_model/configuration_dream.py",
                                "dream/model/generation_utils.py": "ofl/dream_model/generation_utils.py",
                                "dream/model/generation_utils_block.py": "ofl/dream_model/generation_utils_block.py"},
                work)
    materialise(llada_repo, {"generate.py": "ofl/llada_generate.py"}, work)
    for pkg in ("llada_model", "dream_model"):
        (work / "ofl" / pkg / "__init__.py").write_text("")
    ns = types.SimpleNamespace()
    llm = load_package("llada_model", work / "ofl" / "llada_model")
    ns.llada_modeling = importlib.import_module("llada_model.modeling_llada")
    ns.llada_config = importlib.import_module("llada_model.configuration_llada")
    sys.modules["model"] = llm  # Fast-dLLM's llada/generate.py imports model.modeling_llada
    sys.modules["model.modeling_llada"] = ns.llada_modeling
    ns.llada_generate = load_module("llada_generate", work / "ofl" / "llada_generate.py")
    ns.v1_llada = load_module("fastdllm_llada_generate", work / "ofl" / "fastdllm_llada_generate.py")
    load_package("dream_model", work / "ofl" / "dream_model")
    ns.dream_modeling = importlib.import_module("dream_model.modeling_dream")
    ns.dream_config = importlib.import_module("dream_model.configuration_dream")
    ns.dream_gen = importlib.import_module("dream_model.generation_utils")
    ns.dream_block = importlib.import_module("dream_model.generation_utils_block")
    return ns


def official_model(ns, kind: str, directory: Path):
    import torch
    from safetensors.torch import load_file

    raw = json.loads((directory / "config.json").read_text())
    state = load_file(str(directory / "model.safetensors"))
    if kind == "llada":
        cfg = ns.llada_config.LLaDAConfig(**raw)
        model = ns.llada_modeling.LLaDAModelLM(cfg, init_params=False)
    else:
        cfg = ns.dream_config.DreamConfig(**{k: v for k, v in raw.items() if k not in ("architectures", "auto_map")})
        cfg._attn_implementation = "sdpa"
        model = ns.dream_modeling.DreamModel(cfg)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("rotary_emb.inv_freq")]
    if missing or unexpected:
        raise SystemExit(f"{directory}: official model missing {missing[:5]} unexpected {unexpected[:5]}")
    return model.to(torch.float64).eval()


def summarise(logits) -> dict:
    """Per-position sum / max / argmax of [L, V] logits and a few exact values."""
    return {"sum": logits.sum(-1).tolist(), "max": logits.max(-1).values.tolist(),
            "argmax": logits.argmax(-1).tolist(), "slice_first8": logits[:, :8].tolist()}


def run_case(ns, models, case: dict) -> dict:
    import torch

    model = models[case["standin"]]
    p = case["params"]
    prompts = torch.tensor(prompt_ids(case), dtype=torch.long)
    torch.manual_seed(case.get("seed", 0))
    fn = case["official"]
    nfe = None
    if fn == "llada.generate":
        out = ns.llada_generate.generate(model, prompts, **p)
    elif fn.startswith("fastdllm.llada."):
        f = getattr(ns.v1_llada, fn.rsplit(".", 1)[1])
        out, nfe = f(model, prompts, **p)
    elif fn.startswith("dream."):
        mix = ns.dream_block if fn.startswith("dream.block") else ns.dream_gen
        model.diffusion_generate = types.MethodType(mix.DreamGenerationMixin.diffusion_generate, model)
        model._sample = types.MethodType(mix.DreamGenerationMixin._sample, model)
        res = model.diffusion_generate(prompts, return_dict_in_generate=True, output_history=False,
                                       mask_token_id=case["mask_id"], **p)
        out = res.sequences
    else:
        raise SystemExit(f"unknown official function {fn}")
    rec = {"name": case["name"], "sequences": out.tolist()}
    if nfe is not None:
        rec["nfe"] = int(nfe)
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llada-repo", required=True, help=f"ML-GSAI/LLaDA at {LLADA_COMMIT}")
    ap.add_argument("--fastdllm-repo", required=True, help=f"NVlabs/Fast-dLLM at {FASTDLLM_COMMIT}")
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "official_dllm"))
    args = ap.parse_args(argv)
    check_commit(args.llada_repo, LLADA_COMMIT, "ML-GSAI/LLaDA")
    check_commit(args.fastdllm_repo, FASTDLLM_COMMIT, "NVlabs/Fast-dLLM")

    import torch
    import transformers

    from fastdllm_core.modeling import dream, llada

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="official-dllm-"))
    ns = official_code(args.llada_repo, args.fastdllm_repo, work)
    models = {}
    for name, spec in STANDINS.items():
        writer = llada.write_standin if spec["kind"] == "llada" else dream.write_standin
        directory = writer(work / name, **spec["args"])
        models[name] = official_model(ns, spec["kind"], directory)
    logits = []
    for case in LOGIT_CASES:
        with torch.no_grad():
            ids = torch.tensor(prompt_ids(case), dtype=torch.long)
            out = models[case["standin"]](ids).logits
        logits.append({"name": case["name"], "rows": [summarise(out[i]) for i in range(out.shape[0])]})
    samples = []
    for case in CASES:
        samples.append(run_case(ns, models, case))
        print(f"{case['name']}: done", file=sys.stderr)
    doc = {"about": "official outputs on the project's stand-ins (scripts/reference/official_dllm_outputs.py)",
           "commits": {"ML-GSAI/LLaDA": LLADA_COMMIT, "NVlabs/Fast-dLLM": FASTDLLM_COMMIT},
           "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
           "dtype": "float64", "logits": logits, "samples": samples}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "official_outputs.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out / 'official_outputs.json'}: {len(logits)} logit cases, {len(samples)} sampler cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
