"""The embedded default's released tiny AR base (results/released/tiny_ar_base): the default loads it and trains
nothing before the adaptations; `--config build_released=True` builds it from scratch; the committed release is
current -- its files match its manifest, and neither the settings that build it nor the stored training numerics of
its recipes changed since it was built (else: rebuild it)."""
import copy
import json
from pathlib import Path

import pytest
import yaml

from fastdllm_core import release
from fastdllm_dag.plan import checks as plan_checks
from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import released

ROOT = Path(__file__).resolve().parents[1]

NUMERICS = ROOT / "tests" / "data" / "numerics" / "training.json"
REBUILD = ("rebuild it: `snakemake --cores all release_base --config build_released=True`, then commit "
           "results/released/ and run scripts/update_results_doc.py")


def _config(**over):
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg.update(over)
    return cfg


def test_the_default_loads_the_released_base_and_trains_only_adaptations():
    cfg = released.resolve(_config())
    assert "ar_pretrained" not in cfg["models"]
    assert not plan.is_trained(cfg["models"]["ar_base"])
    assert plan.model_source(cfg, "ar_base") == "results/released/tiny_ar_base"
    assert released.builds(cfg) == []
    ntp = plan.training_config(cfg, "ntp", plan.train_files(cfg, "ntp"))
    assert ntp["model"]["init"] == "results/released/tiny_ar_base"
    assert set(plan.trained_models(cfg)) == {"ntp", "bd_naive", "bd_pad", "bd_pad_cm", "dream"}


def test_build_released_trains_the_base_from_scratch():
    cfg = released.resolve(_config(build_released=True))
    assert plan.is_trained(cfg["models"]["ar_base"]) and plan.is_trained(cfg["models"]["ar_pretrained"])
    assert released.builds(cfg) == ["ar_base"]
    assert released.build_chain(cfg, "ar_base") == ["ar_pretrained", "ar_base"]
    assert released.numerics_cases(cfg, "ar_base") == ["ar_pretrain", "sft"]
    ntp = plan.training_config(cfg, "ntp", plan.train_files(cfg, "ntp"))
    assert ntp["model"]["init"] == plan.model_final(cfg, "ar_base")


@pytest.mark.parametrize("edit, field", [
    (lambda m: m["ar_pretrained"].update(released_with="nope"), "models.ar_pretrained.released_with"),
    (lambda m: m["ar_base"].pop("source"), "models.ar_pretrained.released_with"),
    (lambda m: m["ntp"].update(released_with="ar_pretrained"), "models.ntp.released_with"),
])
def test_a_bad_released_with_is_named(edit, field):
    cfg = _config()
    edit(cfg["models"])
    if "source" not in cfg["models"]["ar_base"]:
        cfg["models"]["ar_base"].pop("use_released")
    with pytest.raises(plan_checks.ConfigError, match=field.replace(".", r"\.")):
        plan_checks.check(cfg)


def test_the_committed_release_is_current():
    """Fails when the released base is stale: its files changed, or the training settings / stored training
    numerics that build it moved since its manifest was written."""
    cfg = released.resolve(_config(build_released=True))
    src = ROOT / _config()["models"]["ar_base"]["source"]
    key = release.config_digest(released.build_settings(cfg, "ar_base"))
    num = release.numerics_digest(NUMERICS, released.numerics_cases(cfg, "ar_base"))
    found = release.problems(src, key, num)
    assert not found, f"{src.relative_to(ROOT)}: {'; '.join(found)}; {REBUILD}"
    man = release.read_manifest(src)
    assert man["chain"] == ["ar_pretrained", "ar_base"]
    assert {s["task"] for s in man["scores"]} >= {"synth_arith", "synth_code", "synth_mc"}
    for stage in man["trained"].values():
        assert stage["cpu_isa"] and stage["git_commit"]


def test_the_release_loads_as_the_configured_architecture():
    from fastdllm_core.loading import load_model

    cfg = _config()
    loaded = load_model(str(ROOT / cfg["models"]["ar_base"]["source"]), device="cpu")
    arch = cfg["models"]["ar_pretrained"]["train"]["model"]["tiny"]
    c = loaded.model.config
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads) == (
        arch["hidden_size"], arch["layers"], arch["heads"])
    assert len(loaded.tokenizer) <= c.vocab_size and loaded.mask_token_id is not None


def test_staleness_is_detected(tmp_path):
    final = tmp_path / "final"
    final.mkdir()
    (final / "config.json").write_text("{}")
    (final / "model.safetensors").write_bytes(b"weights")
    (final / ".snakemake_timestamp").write_bytes(b"")
    (final / "model.safetensors").chmod(0o444)
    out = release.write_release(final, tmp_path / "rel", {"config_digest": "a", "numerics_digest": "b"})
    assert release.problems(out, "a", "b") == []
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "manifest.json", "model.safetensors"]
    assert (out / "model.safetensors").stat().st_mode & 0o777 == 0o644
    assert len(release.problems(out, "a2", "b")) == 1 and len(release.problems(out, "a", "b2")) == 1
    (out / "model.safetensors").write_bytes(b"other")
    assert "model.safetensors" in release.problems(out, "a", "b")[0]
    again = release.write_release(final, tmp_path / "rel", {"config_digest": "a", "numerics_digest": "b"})
    assert release.problems(again, "a", "b") == [] and not (tmp_path / "rel.tmp").exists()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        release.write_release(tmp_path, tmp_path / "x", {})


def test_numerics_digest_follows_the_stored_values(tmp_path):
    store = json.loads(NUMERICS.read_text())
    base = release.numerics_digest(NUMERICS, ["ar_pretrain", "sft"])
    moved = copy.deepcopy(store)
    moved["cases"]["sft"]["written"] = {"commit": "elsewhere"}  # when it was written does not count
    (tmp_path / "same.json").write_text(json.dumps(moved))
    assert release.numerics_digest(tmp_path / "same.json", ["ar_pretrain", "sft"]) == base
    moved["cases"]["sft"]["values"]["config"]["recipe"] = "other"
    (tmp_path / "moved.json").write_text(json.dumps(moved))
    assert release.numerics_digest(tmp_path / "moved.json", ["ar_pretrain", "sft"]) != base
    with pytest.raises(KeyError, match="nope"):
        release.numerics_digest(NUMERICS, ["nope"])
