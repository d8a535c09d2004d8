"""The adaptation data (fastdllm_core.training.adaptation_data, rule adaptation_data) and the n/a rows of trained
models without training data (workflow/fastdllm_dag/plan/data.py)."""
import copy
import hashlib
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from conftest import smk
from fastdllm_core import rehearsal
from fastdllm_core.training import adaptation_data as ad
from fastdllm_core.training.data import check_row, to_messages
from fastdllm_dag.plan import data as plan_data
from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import points as plan_points

ROOT = Path(__file__).resolve().parents[1]

# rows in the dataset's own schema (dataset card / NeMo-Curator's tutorial): input, output, reasoning, ...
ROW_ON = {"input": [{"role": "user", "content": "2+2?"}], "output": "<think>add</think>4", "reasoning": "on",
          "system_prompt": "detailed thinking on", "category": "math", "license": "cc-by-4.0",
          "generator": "x", "used_in_training": ["Ultra"], "version": "v1"}
ROW_OFF = dict(ROW_ON, output="4", reasoning="off", system_prompt="detailed thinking off")
ROW_MULTI = dict(ROW_OFF, input=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                 {"role": "user", "content": "c"}], output="d")


def test_converter_keeps_the_configured_reasoning_mode_and_the_conversation():
    assert ad.to_training_row(ROW_ON, "off") is None
    assert ad.to_training_row(ROW_OFF, "on") is None
    off = ad.to_training_row(ROW_OFF, "off")
    assert off == {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}
    on = ad.to_training_row(ROW_ON, "all")
    assert on["messages"][-1]["content"] == "<think>add</think>4"  # the trace kept as the dataset has it
    multi = ad.to_training_row(ROW_MULTI, "off")
    assert [m["role"] for m in multi["messages"]] == ["user", "assistant", "user", "assistant"]
    assert multi["messages"][-1]["content"] == "d"
    check_row(multi)  # the training code's own row check (data.train_files)
    assert to_messages(multi) == multi["messages"]


def test_system_prompt_dropped_by_default_and_kept_on_request():
    assert all(m["role"] != "system" for m in ad.to_training_row(ROW_OFF, "off")["messages"])
    kept = ad.to_training_row(ROW_OFF, "off", keep_system_prompt=True)["messages"]
    assert kept[0] == {"role": "system", "content": "detailed thinking off"}


def test_bad_rows_and_config_values_name_what_is_wrong():
    with pytest.raises(ValueError, match="'input'"):
        ad.to_training_row({"reasoning": "off", "output": "x"}, "off")
    with pytest.raises(ValueError, match="data.adaptation.subsets"):
        ad.resolve({"subsets": ["poetry"]})
    with pytest.raises(ValueError, match="data.adaptation.reasoning"):
        ad.resolve({"reasoning": "maybe"})
    with pytest.raises(ValueError, match="data.adaptation.token_budget"):
        ad.resolve({"token_budget": 0})


def test_offline_without_a_local_copy_is_a_named_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ad.AdaptationDataUnavailable, match="data.adaptation.local_dir"):
        ad.source_dir(ad.resolve({}))
    reason = ad.unavailable_reason({"local_dir": str(tmp_path)})  # a copy without the SFT/<subset> files
    assert "data.adaptation.local_dir" in reason and "SFT/<subset>/*.jsonl" in reason


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    from transformers import AutoTokenizer

    d = tmp_path_factory.mktemp("adapt")
    rehearsal.write_standin_data(d / "data", tasks=["nemotron"], n_train=24)
    rehearsal.write_standin_model(d / "tok", "qwen2", seed=1)
    return d / "data" / "nemotron", AutoTokenizer.from_pretrained(d / "tok")


@pytest.mark.slow(reason="builds with a process pool (seen by the spawn guard of tests/conftest.py)")
def test_build_is_seeded_budgeted_and_has_a_manifest(standin, tmp_path):
    src, tok = standin
    cfg = {"local_dir": str(src), "token_budget": 600, "subsets": ["math", "chat"], "seed": 3}
    m1 = ad.build(cfg, tok, tmp_path / "a.jsonl", progress=False)
    m2 = ad.build(cfg, tok, tmp_path / "b.jsonl", progress=False)
    assert m1["sha256"] == m2["sha256"] and (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    m3 = ad.build(dict(cfg, seed=4), tok, tmp_path / "c.jsonl", progress=False)
    assert m3["sha256"] != m1["sha256"]  # another seed, another sample
    rows = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert hashlib.sha256((tmp_path / "a.jsonl").read_bytes()).hexdigest() == m1["sha256"]
    assert len(rows) == m1["rows"] == sum(s["rows"] for s in m1["subsets"].values())
    assert all(r["messages"][-1]["content"].count("<think>") == 0 for r in rows)  # reasoning off by default
    for s in ("math", "chat"):  # each subset fills its share, with no row more than needed
        st = m1["subsets"][s]
        assert st["budget_tokens"] == 300 and st["rows"] < st["eligible_rows"]
        assert st["tokens"] >= 300
    assert sum(ad.count_tokens(tok, r) for r in rows) == m1["tokens"]  # counted with the chat template
    on_disk = json.loads(ad.manifest_path(tmp_path / "a.jsonl").read_text())
    assert on_disk["dataset"] == ad.DATASET and on_disk["revision"] == "main" and on_disk["config"]["seed"] == 3


def test_a_hub_snapshot_records_the_commit_that_main_resolved_to(standin, tmp_path, monkeypatch):
    """``revision: main`` moves; the manifest pins the snapshot's commit (huggingface_hub's snapshots/<sha>)."""
    import shutil

    import huggingface_hub

    src, tok = standin
    sha = "0123456789abcdef0123456789abcdef01234567"
    snap = tmp_path / "hub" / "datasets--nvidia--x" / "snapshots" / sha
    shutil.copytree(src, snap)
    asked = {}

    def fake_download(repo_id, **kw):
        asked.update(kw, repo_id=repo_id)
        return str(snap)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    m = ad.build({"token_budget": 300, "subsets": ["math"]}, tok, tmp_path / "a.jsonl", progress=False)
    assert asked["repo_id"] == ad.DATASET and asked["revision"] == "main" and asked["repo_type"] == "dataset"
    assert m["revision"] == "main" and m["revision_commit"] == sha
    local = ad.build({"local_dir": str(src), "token_budget": 300, "subsets": ["math"]}, tok, tmp_path / "b.jsonl",
                     progress=False)
    assert local["revision_commit"] is None and local["source"] == str(src)


def _paper():
    c = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    return dict(c, results_dir="results")


def test_trained_rows_without_data_are_na_and_plan_no_training(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # no data/sft/adaptation_train.jsonl here
    c = plan_data.mark_unavailable(plan.expand_seeds(_paper()))
    na = {n for n, m in c["models"].items() if m.get("train_unavailable")}
    assert na == {"nemo_ft_1.5b", "nemo_ft_7b", "bd_naive_1.5b", "bd_pad_1.5b", "bd_pad_cm_1.5b"}
    assert "data.adaptation.local_dir" in c["models"]["nemo_ft_1.5b"]["train_unavailable"]
    assert "data.train_files" in c["models"]["nemo_ft_1.5b"]["train_unavailable"]
    assert plan.trained_models(c) == [] and plan.model_inputs(c, "nemo_ft_1.5b") == []
    assert "nemo_ft_1.5b" in plan_points.evaluation_jobs(c)  # its n/a rows keep Table 1's row
    batch = {r["model"] for r in plan_points.bench_sweeps(c)["batch"]}
    assert not batch & na and {"fastdllm_v2_7b", "qwen2.5_7b", "llada_8b"} <= batch
    # the file there, or a local copy of the dataset: trained again
    (tmp_path / "data" / "sft").mkdir(parents=True)
    (tmp_path / "data" / "sft" / "adaptation_train.jsonl").write_text("{}\n")
    assert plan_data.train_data_reason(_paper(), "nemo_ft_1.5b") is None
    (tmp_path / "data" / "sft" / "adaptation_train.jsonl").unlink()
    local = tmp_path / "nemotron"
    rehearsal.write_standin_data(tmp_path / "sd", tasks=["nemotron"], n_train=2)
    os.rename(tmp_path / "sd" / "nemotron", local)
    cfg = copy.deepcopy(_paper())
    cfg["data"]["adaptation"]["local_dir"] = str(local)
    assert plan_data.train_data_reason(cfg, "nemo_ft_1.5b") is None
    assert plan_data.adaptation_tokenizer(cfg) == "Qwen/Qwen2.5-1.5B-Instruct"


def test_a_role_without_training_data_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    cfg = copy.deepcopy(_paper())
    cfg["roles"]["ablation_bd"] = "bd_pad_cm_1.5b"
    with pytest.raises(ValueError, match="roles.ablation_bd"):
        plan_data.mark_unavailable(cfg)


def test_paper_dry_run_without_training_data_plans_every_table_and_no_training(tmp_path):
    r = smk("paper_figures", "-n", "--nolock", "--cores", "2", "--configfile", "config/paper.yaml", "--config",
            f"results_dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", out.split("Job stats:", 1)[1], re.M))
    assert "train_model" not in stats and "adaptation_data" not in stats
    assert "n/a rows" in out and "data.adaptation.local_dir" in out
    for rule in ("table1_main", "table2_recipe_ablation", "table3_subblock_size", "table4_block_size_mismatch",
                 "fig1a_throughput_vs_accuracy", "fig1b_throughput_batch", "fig_threshold_gsm8k",
                 "fig_gpu_batch_throughput", "fig_subblock_accuracy", "fig_subblock_throughput"):
        assert stats.get(rule) == "1", rule


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_malformed_rows_are_skipped_counted_and_named(standin, tmp_path):
    src, tok = standin
    root = _copy(src, tmp_path / "src")
    f = sorted((root / "SFT" / "math").glob("*.jsonl"))[0]
    n = len(f.read_text().splitlines())
    with open(f, "a") as fh:
        fh.write('{"input": [{"role": "user"\n')  # cut short
        fh.write(json.dumps(dict(ROW_OFF, input=[{"role": "user"}])) + "\n")  # no content
        fh.write(json.dumps(dict(ROW_OFF, output=None)) + "\n")
    m = ad.build({"local_dir": str(root), "token_budget": 300, "subsets": ["math"]}, tok, tmp_path / "a.jsonl",
                 progress=False)
    st = m["subsets"]["math"]
    assert st["malformed_rows"] == m["malformed_rows"] == 3 and m["rows"] > 0
    assert st["malformed_examples"][0].startswith(f"{f}:{n + 1}: not valid JSON")
    assert st["malformed_reasons"] == m["malformed_reasons"] == {"missing or mistyped field": 2, "not JSON": 1}
    assert f"{f}:{n + 2}:" in st["malformed_examples"][1] and f"{f}:{n + 3}:" in st["malformed_examples"][2]


@pytest.mark.slow(reason="builds with a process pool (seen by the spawn guard of tests/conftest.py)")
def test_a_subset_that_runs_out_leaves_its_share_to_the_others(standin, tmp_path):
    src, tok = standin
    root = _copy(src, tmp_path / "src")
    chat = sorted((root / "SFT" / "chat").glob("*.jsonl"))[0]
    chat.write_text("".join(line + "\n" for line in chat.read_text().splitlines()[:2]))  # 2 rows
    cfg = {"local_dir": str(root), "token_budget": 400, "subsets": ["math", "chat"], "seed": 1}
    m = ad.build(cfg, tok, tmp_path / "a.jsonl", progress=False)
    ch, ma = m["subsets"]["chat"], m["subsets"]["math"]
    assert ch["exhausted"] and ch["tokens"] < 200 and ch["rows"] == ch["eligible_rows"]
    assert ma["redistributed_tokens"] == int(200 - ch["tokens"]) and not ma["exhausted"]
    assert m["tokens"] >= 400 and m["shortfall_tokens"] == 0
    spent = ad.build(dict(cfg, token_budget=10 ** 6), tok, tmp_path / "b.jsonl", progress=False)
    assert all(s["exhausted"] and s["rows"] == s["eligible_rows"] for s in spent["subsets"].values())
    assert spent["shortfall_tokens"] == 10 ** 6 - spent["tokens"] > 0
    parallel = ad.build(cfg, tok, tmp_path / "c.jsonl", progress=False, processes=2)  # forked processes
    assert parallel["sha256"] == m["sha256"] and parallel["subsets"] == m["subsets"]
