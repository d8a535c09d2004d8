"""A GPU user's first run from a fresh clone (issue 30): the sweep's prompts load like the evaluation's data
(local file, else the Hub's GSM8K, else an error naming data.eval_paths.gsm8k), and a gated model or dataset
refused by the Hub is named with its fix (the sweep records such a model as n/a and measures the others)."""
import json
import sys
import types

import httpx2
import pytest
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

from fastdllm_core.bench import PromptsUnavailable, load_or_reason, load_prompt_texts, na_rows
from fastdllm_core.hub_access import HubAccessError, describe_refusal, hub_guard, refusal

LLAMA = "meta-llama/Llama-3.2-1B-Instruct"


def _http(cls, status, repo):
    req = httpx2.Request("GET", f"https://huggingface.co/{repo}/resolve/main/config.json")
    return cls(f"{status} Client Error. Access to model {repo} is restricted.", response=httpx2.Response(status,
                                                                                                          request=req))


@pytest.fixture
def no_local_gsm8k(monkeypatch, tmp_path):
    monkeypatch.setenv("FASTDLLM_SHARED_DIR", str(tmp_path / "no_shared"))
    monkeypatch.delenv("FASTDLLM_GSM8K_PATH", raising=False)


def test_prompts_from_a_local_file(tmp_path):
    f = tmp_path / "test.jsonl"
    f.write_text("".join(json.dumps({"question": f"q{i}?", "answer": "#### 1"}) + "\n" for i in range(3)))
    assert load_prompt_texts("gsm8k", str(f)) == (["q0?", "q1?", "q2?"], str(f))
    with pytest.raises(PromptsUnavailable, match=r"data\.eval_paths\.gsm8k"):
        load_prompt_texts("gsm8k", str(tmp_path / "missing.jsonl"))


def test_offline_without_a_local_copy_names_the_key(monkeypatch, no_local_gsm8k):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def never(*a, **k):
        raise AssertionError("datasets must not be asked offline")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=never))
    with pytest.raises(PromptsUnavailable, match=r"offline.*set data\.eval_paths\.gsm8k"):
        load_prompt_texts("gsm8k", None)
    with pytest.raises(PromptsUnavailable, match=r"set data\.eval_paths\.humaneval"):
        load_prompt_texts("humaneval", None)


def _online(monkeypatch, load_dataset):
    for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "FASTDLLM_OFFLINE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))


def test_hub_prompts_are_the_evaluations_gsm8k(monkeypatch, no_local_gsm8k):
    calls = []

    def load_dataset(path, name, split):
        calls.append((path, name, split))
        return [{"question": "How many?", "answer": "#### 2"}, {"question": "Why?", "answer": "#### 3"}]

    _online(monkeypatch, load_dataset)
    texts, where = load_prompt_texts("gsm8k", None)
    # the dataset, configuration and split of lm-eval's gsm8k task, the field of its doc_to_text
    assert calls == [("openai/gsm8k", "main", "test")]
    assert texts == ["How many?", "Why?"] and where == "hub openai/gsm8k/main:test"


def test_refused_hub_dataset_is_the_named_error(monkeypatch, no_local_gsm8k):
    def load_dataset(path, name, split):
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)")

    _online(monkeypatch, load_dataset)
    with pytest.raises(PromptsUnavailable, match=r"hub openai/gsm8k.*ConnectionError.*data\.eval_paths\.gsm8k"):
        load_prompt_texts("gsm8k", None)


@pytest.mark.parametrize("cls,status,why", [(GatedRepoError, 401, "gated"),
                                            (RepositoryNotFoundError, 404, "not found or private")])
def test_hub_refusals_name_the_repository_and_the_fix(cls, status, why):
    err = _http(cls, status, LLAMA)
    wrapped = OSError(f"You are trying to access a gated repo. {LLAMA}")  # transformers' re-raise
    wrapped.__cause__ = err
    assert refusal(wrapped) == why
    msg = describe_refusal(wrapped, LLAMA, "model")
    assert LLAMA in msg and "HF_TOKEN" in msg and f"https://huggingface.co/{LLAMA}" in msg
    assert "huggingface.co/datasets/Idavidrein/gpqa" in describe_refusal(err, "Idavidrein/gpqa", "dataset")
    assert refusal(ValueError("aggregated mean")) is None  # "gated" as a word only
    with pytest.raises(ValueError):  # any other error passes unchanged
        with hub_guard(LLAMA):
            raise ValueError("a bug")


def test_load_model_names_a_gated_model(monkeypatch):
    from fastdllm_core import loading as model_mod

    def gated(*a, **k):
        raise OSError(f"Cannot access gated repo {LLAMA}") from _http(GatedRepoError, 403, LLAMA)

    monkeypatch.setattr(model_mod, "_source_config", gated)
    with pytest.raises(HubAccessError, match=r"meta-llama/Llama-3.2-1B-Instruct \(gated\).*HF_TOKEN") as ei:
        model_mod.load_model(LLAMA)
    assert ei.value.repo_id == LLAMA and ei.value.kind == "model"


def test_gated_model_of_a_sweep_becomes_na_rows(monkeypatch):
    """bench.py's per-model step: a loader raising GatedRepoError gives n/a rows with the reason; a loadable
    model is returned as is."""
    from fastdllm_core import loading as model_mod
    from fastdllm_core.bench import load_bench_model

    monkeypatch.setattr(model_mod, "_source_config",
                        lambda *a, **k: (_ for _ in ()).throw(_http(GatedRepoError, 401, LLAMA)))
    bm, reason = load_or_reason(lambda: load_bench_model(LLAMA), LLAMA)
    assert bm is None and LLAMA in reason and "HF_TOKEN" in reason
    runs = [{"model": "llama", "mode": "ar", "batch_size": 4, "decode": {}},
            {"model": "llama", "mode": "bd", "batch_size": 4,
             "decode": {"threshold": 0.9, "sub_block_size": 8, "use_sub_block_cache": True}}]
    rows = na_rows(runs, reason)
    assert [(r["mode"], r["status"], r["tokens_per_s"]) for r in rows] == [("ar", "n/a", ""), ("bd", "n/a", "")]
    assert rows[1]["threshold"] == 0.9 and all(r["note"] == reason for r in rows)
    ok, none = load_or_reason(lambda: load_bench_model("random:tiny"), "random:tiny")
    assert ok is not None and none == ""
    with pytest.raises(ZeroDivisionError):  # a bug in the loader is not hidden as n/a
        load_or_reason(lambda: 1 / 0, "x")


def test_gpu_figure_builds_with_na_rows(tmp_path):
    """Figure 5 from a gpu_batch CSV where one model is n/a: drawn from the measured rows."""
    import csv

    from analysis.fig_speed import fig_gpu_batch_throughput
    from analysis.results_io import load_throughput

    base = {"sweep": "gpu_batch", "device_type": "cuda", "device_name": "NVIDIA H100", "status": "ok", "note": ""}
    rows = [dict(base, model="ar", mode="ar", batch_size=b, tokens_per_s=100 * b) for b in (1, 4)]
    rows += [dict(base, model="bd", mode="bd", batch_size=b, tokens_per_s=150 * b, threshold=0.9) for b in (1, 4)]
    rows += [dict(base, model="llama", mode="ar", batch_size=b, tokens_per_s="", status="n/a", device_type="",
                  device_name="", note=f"the Hugging Face Hub refused model {LLAMA} (gated)") for b in (1, 4)]
    path = tmp_path / "gpu_batch.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        w.writeheader()
        w.writerows(rows)
    thr = load_throughput(path)
    assert len(thr) == 4 and set(thr["model"]) == {"ar", "bd"}
    names = fig_gpu_batch_throughput(thr, {"ar_model": "ar", "bd_model": "bd"}, tmp_path / "f.png",
                                     tmp_path / "f.pdf")
    assert names == ["NVIDIA H100"] and (tmp_path / "f.png").stat().st_size > 0


def test_config_check_knows_the_hub_prompt_tasks():
    """plan_checks lets bench.prompts_from be a Hub task without data.eval_paths: the same list the loader has."""
    from fastdllm_core.bench.prompt_source import HUB_TASKS
    from fastdllm_dag.plan import checks as plan_checks

    assert plan_checks.BENCH_HUB_TASKS == HUB_TASKS
