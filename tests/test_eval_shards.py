"""Evaluation shards (fastdllm_core.evaluation.shards): shards of a task merged give the unsharded run's rows
(value, n, 95% interval), and a killed shard resumes from its per-request progress without recomputing."""
from __future__ import annotations

import pytest

from conftest import tiny_eval_setup
from fastdllm_core.decoding import DecodeConfig
from fastdllm_core.evaluation import run_task
from fastdllm_core.evaluation.shards import merge_shards

DECODE = DecodeConfig(block_size=8, sub_block_size=4, max_new_tokens=8)


pytestmark = pytest.mark.usefixtures("hub_offline")  # conftest: the Hub and datasets offline


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    model, suite, _ = tiny_eval_setup(tmp_path_factory, "shards", n_eval=8)
    return model, suite


def _samples(path):
    import json

    return [json.loads(line) for line in open(path / "samples.jsonl")]


KEEP = ("metric", "value", "n", "ci_low", "ci_high", "note", "filter")


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
@pytest.mark.parametrize("task,n", [("synth_mc", 2), ("synth_ifeval", 2)])
def test_shards_merge_to_the_unsharded_rows(setup, tmp_path, task, n):
    model, suite = setup
    kw = dict(mode="bd", decode=DECODE, batch_size=4, limit=5, data_path=suite[f"{task}_test"])
    whole = run_task(model, task, out_dir=tmp_path / "whole", **kw)
    parts = []
    for k in range(1, n + 1):
        rows = run_task(model, task, out_dir=tmp_path / f"s{k}", shard=(k, n), **kw)
        parts.append({"rows": rows, "samples": _samples(tmp_path / f"s{k}")})
    sizes = [len(p["samples"]) for p in parts]
    assert sum(sizes) == 5 and all(s > 0 for s in sizes)
    ids = sorted(s["doc_id"] for p in parts for s in p["samples"])
    assert ids == list(range(5))  # contiguous ranges covering the unsharded items once
    merged = merge_shards(parts)
    assert [{k: r[k] for k in KEEP} for r in merged] == [{k: r[k] for k in KEEP} for r in whole]
    if task == "synth_mc":  # (the tiny random model scores 0 on synth_ifeval: there the check is of n and intervals)
        assert any(0 < r["value"] < 100 for r in whole), "the check needs a value that is neither 0 nor 100"
        assert any(r["value"] != whole[0]["value"] for p in parts for r in p["rows"])  # the shards differ


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
def test_merge_refuses_a_value_that_is_not_a_per_item_mean(setup, tmp_path):
    model, suite = setup
    rows = run_task(model, "synth_mc", decode=DECODE, limit=4, out_dir=tmp_path, data_path=suite["synth_mc_test"],
                    shard=(1, 2))
    bad = [dict(r, value=r["value"] + 1.0) for r in rows]
    with pytest.raises(ValueError, match="not the mean of its per-item results"):
        merge_shards([{"rows": bad, "samples": _samples(tmp_path)}])


def _run_shards(model, task, n, tmp_path, **kw):
    parts = []
    for k in range(1, n + 1):
        rows = run_task(model, task, out_dir=tmp_path / f"s{k}", shard=(k, n), **kw)
        parts.append({"rows": rows, "samples": _samples(tmp_path / f"s{k}")})
    return parts


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
@pytest.mark.parametrize("task", ["synth_code", "humaneval"])
def test_evalplus_shards_merge_to_the_unsharded_rows(setup, tmp_path, monkeypatch, task):
    """An EvalPlus task in 3 shards: each generates and scores only its range of the sorted, limited problems;
    merged, pass@1 base and plus (synth_code) or base and the n/a plus row (humaneval over a file without plus
    inputs: base tests only) equal the unsharded run's.  3 of the 7 answers are replaced by the canonical solution
    (the tiny model solves none), so that the values are neither 0 nor 100."""
    import gzip
    import json

    from fastdllm_core.evaluation import codeeval

    model, suite = setup
    problems = [json.loads(line) for line in gzip.open(suite["synth_code_test"], "rt")]
    data = suite["synth_code_test"]
    if task == "humaneval":
        data = tmp_path / "base_only.jsonl"
        data.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "plus_input"}) + "\n"
                                for r in problems))
    solved = {r["entry_point"]: r["prompt"] + r["canonical_solution"] for r in problems[:7:3]}
    real = codeeval.extract_code
    monkeypatch.setattr(codeeval, "extract_code", lambda text, entry: (solved[entry], True) if entry in solved
                        else real(text, entry))
    kw = dict(mode="bd", decode=DECODE, batch_size=2, limit=7, data_path=data, prompt_style="plain")
    whole = run_task(model, task, out_dir=tmp_path / "whole", **kw)
    parts = _run_shards(model, task, 3, tmp_path, **kw)
    ids = [s["task_id"] for p in parts for s in p["samples"]]
    assert ids == [s["task_id"] for s in _samples(tmp_path / "whole")] and len(ids) == 7  # each item once, in order
    assert [len(p["samples"]) for p in parts] == [2, 2, 3]
    merged = merge_shards(parts)
    keep = KEEP + ("status",)
    assert [{k: r[k] for k in keep} for r in merged] == [{k: r[k] for k in keep} for r in whole]
    assert merged[0]["total_tokens"] == whole[0]["total_tokens"]
    assert round(merged[0]["value"], 2) == 42.86 and len({r["value"] for p in parts for r in p["rows"][:1]}) > 1
    assert [(r["status"], r["n"]) for r in merged] == [("ok", 7), ("ok" if task == "synth_code" else "n/a", 7)]


def test_a_bad_shard_is_refused(setup, tmp_path):
    model, suite = setup
    kw = dict(decode=DECODE, data_path=suite["synth_code_test"], limit=2)
    with pytest.raises(ValueError, match=r"shard must be \(k, n\) with 1 <= k <= n, got \(3, 2\)"):
        run_task(model, "synth_code", out_dir=tmp_path / "a", shard=(3, 2), **kw)
    with pytest.raises(ValueError, match="synth_code: 2 item\\(s\\) leave shard 1 of 3 empty"):
        run_task(model, "synth_code", out_dir=tmp_path / "b", shard=(1, 3), **kw)


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
def test_random_fewshot_shards_keep_the_unsharded_prompts(setup, tmp_path, monkeypatch):
    """A 3-shot multiple-choice task whose examples come from its own test split through lm-eval's default
    (random) sampler, as GPQA's: in 3 shards every item gets the unsharded prompt (the same examples), and the
    merged rows equal the unsharded ones; lm-eval's own samples= on a shard would draw other examples."""
    from fastdllm_core.evaluation import tasks

    real = tasks.build_lm_eval_tasks

    def three_shot(task, data_path=None, prompt_style="paper"):
        specs, info = real(task, data_path, prompt_style)
        return [dict(s, num_fewshot=3, fewshot_split="test") for s in specs], info

    monkeypatch.setattr(tasks, "build_lm_eval_tasks", three_shot)
    model, suite = setup
    kw = dict(mode="bd", decode=DECODE, batch_size=4, limit=7, data_path=suite["synth_mc_test"])
    whole = run_task(model, "synth_mc", out_dir=tmp_path / "whole", **kw)
    prompts = {s["doc_id"]: s["prompt"] for s in _samples(tmp_path / "whole")}
    assert all(p.count("Answer:") == 4 for p in prompts.values())  # 3 examples and the question
    parts = _run_shards(model, "synth_mc", 3, tmp_path, **kw)
    got = {s["doc_id"]: s["prompt"] for p in parts for s in p["samples"]}
    assert got == prompts
    merged = merge_shards(parts)
    assert [{k: r[k] for k in KEEP} for r in merged] == [{k: r[k] for k in KEEP} for r in whole]
    assert any(0 < r["value"] < 100 for r in whole), "the check needs a value that is neither 0 nor 100"
    # the check can fail: lm-eval's samples= alone builds the contexts from the shard's first item, and its
    # sampler then draws other examples (contexts without the chat template, both ways)
    from lm_eval.tasks import get_task_dict

    specs, info = three_shot("synth_mc", suite["synth_mc_test"])

    def contexts(**build):
        task = next(iter(get_task_dict(specs, info["task_manager"]).values()))
        task.set_fewshot_seed(0)
        task.build_all_requests(**build)
        return {build.get("samples", range(7))[i.doc_id]: i.args[0] for i in task.instances}

    full, naive = contexts(limit=7), contexts(samples=[4, 5, 6])
    assert set(naive) == {4, 5, 6} and any(naive[i] != full[i] for i in naive)


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
@pytest.mark.parametrize("task", ["synth_ifeval", "synth_code"])
def test_a_killed_shard_resumes_from_its_progress(setup, tmp_path, monkeypatch, task):
    """The first run dies after its first batch of 2 prompts; the rerun decodes only the 3 others and gives the
    rows of an uninterrupted run (an lm-eval task: lm-eval's request cache; EvalPlus: its answers' JSONL)."""
    from fastdllm_core.evaluation import lm_model

    model, suite = setup
    kw = dict(mode="bd", decode=DECODE, batch_size=2, limit=5, data_path=suite[f"{task}_test"])
    clean = run_task(model, task, out_dir=tmp_path / "clean", **kw)
    real, rows_decoded = lm_model.bd_generate, []

    def dying(m, batch, **k):
        if rows_decoded:
            raise KeyboardInterrupt("killed")
        rows_decoded.append(len(batch))
        return real(m, batch, **k)

    progress = str(tmp_path / "progress" / "db")
    monkeypatch.setattr(lm_model, "bd_generate", dying)
    with pytest.raises(KeyboardInterrupt):
        run_task(model, task, out_dir=tmp_path / "run", progress=progress, **kw)
    assert rows_decoded == [2]

    def counting(m, batch, **k):
        rows_decoded.append(len(batch))
        return real(m, batch, **k)

    rows_decoded.clear()
    monkeypatch.setattr(lm_model, "bd_generate", counting)
    rows = run_task(model, task, out_dir=tmp_path / "run", progress=progress, **kw)
    assert sum(rows_decoded) == 3
    assert [{k: r[k] for k in KEEP} for r in rows] == [{k: r[k] for k in KEEP} for r in clean]


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
@pytest.mark.parametrize("task", ["synth_mc", "synth_code"])
def test_dag_scripts_merge_shards_into_the_points_rows(setup, tmp_path, monkeypatch, task):
    """workflow/scripts/evaluate_shard.py (two shards) then evaluate.py (the merge) give the point's rows of an
    unsharded evaluate.py: the same value, n and interval in the job's accuracy CSV (an lm-eval task and an
    EvalPlus one)."""
    import csv
    import runpy
    from pathlib import Path
    from types import SimpleNamespace

    root = Path(__file__).resolve().parents[1]
    from fastdllm_dag.plan import eval_cost

    model, suite = setup
    src = str(Path(model.source))
    point = "bd_b8_s4_t0.9_c0"
    config = {"seed": 0, "device": "cpu", "scale": "t", "models": {"m": {"mode": "bd"}}}

    def params(cache, **more):
        return SimpleNamespace(source=src, points={task: [point]}, data_paths={task: suite[f"{task}_test"]},
                               data_path=suite[f"{task}_test"], mode="bd", max_new_tokens=8, batch_size=4, limit=4,
                               cache_dir=str(tmp_path / cache), model="m", label="m",
                               verdict_cache=str(tmp_path / "verdicts"), mdm_loglikelihood="mc", mc_num=128, **more)

    def run(script, p, out, inputs, wildcards=None):
        sm = SimpleNamespace(params=p, config=config, input=SimpleNamespace(model=[], **inputs), log=[], threads=1,
                             output=[str(out)], scriptdir=str(root / "workflow" / "scripts"), rule=script,
                             wildcards=SimpleNamespace(**(wildcards or {})))
        runpy.run_path(str(root / "workflow" / "scripts" / f"{script}.py"), init_globals={"snakemake": sm})

    names = [eval_cost.shard_name("m", task, point, k, 2) for k in (1, 2)]
    for k, name in enumerate(names, 1):
        sj = {"model": "m", "task": task, "point": point, "k": k, "n": 2}
        run("evaluate_shard", params("sharded", shard=sj), tmp_path / f"{name}.json", {}, {"shard": name})
    assert not list((tmp_path / "sharded").rglob("*.progress"))  # a finished shard removes its progress
    monkeypatch.setattr(eval_cost, "job_shards", lambda config, job: {(task, point): names})
    run("evaluate", params("sharded"), tmp_path / "sharded.csv",
        {"shards": [str(tmp_path / f"{n}.json") for n in names]})
    monkeypatch.setattr(eval_cost, "job_shards", lambda config, job: {})
    run("evaluate", params("whole"), tmp_path / "whole.csv", {})
    rows = {n: list(csv.DictReader(open(tmp_path / f"{n}.csv"))) for n in ("sharded", "whole")}
    assert [{k: r[k] for k in KEEP} for r in rows["sharded"]] == [{k: r[k] for k in KEEP} for r in rows["whole"]]
    assert [r["n"] for r in rows["whole"]] == ["4"] * len(rows["whole"]) and rows["whole"][0]["point"] == point


def test_gpqa_choice_order_does_not_depend_on_earlier_loads():
    """lm-eval's GPQA shuffles each item's choices with a module-level random.Random that every processing of
    the split advances (two processings differ); build_lm_eval_tasks restarts it at each call, so that the
    prompt, its scoring and every shard see one order."""
    import datasets

    from fastdllm_core.evaluation.tasks import _task_manager, official_config, restarted_shuffle

    original = official_config(_task_manager("gpqa_main_n_shot"), "gpqa_main_n_shot")["process_docs"]
    rows = [{"Question": f"q{i}", "Correct Answer": f"right {i}", "Incorrect Answer 1": f"a {i}",
             "Incorrect Answer 2": f"b {i}", "Incorrect Answer 3": f"c {i}"} for i in range(12)]
    ds = datasets.Dataset.from_list(rows)

    def answers(fn):
        return [d["answer"] for d in fn(ds)]

    assert answers(original) != answers(original)  # the trap: the order moves with every processing
    fixed = restarted_shuffle(original)
    first = answers(fixed)
    answers(original)
    assert answers(fixed) == first and len(set(first)) > 1


def test_a_local_gpqa_file_is_the_split_lm_eval_evaluates(tmp_path):
    """GPQA has no test split (lm-eval evaluates its validation split, "train", and draws the 5 shots from the
    same split): a local copy (data.eval_paths.gpqa) is that split, so every row of the file is an item."""
    import json

    from lm_eval.tasks import get_task_dict

    from fastdllm_core.evaluation.lm_eval_run import _leaves
    from fastdllm_core.evaluation.tasks import build_lm_eval_tasks

    f = tmp_path / "gpqa_main.jsonl"
    f.write_text("".join(json.dumps({"Question": f"q{i}", "Correct Answer": f"right {i}",
                                     "Incorrect Answer 1": f"a {i}", "Incorrect Answer 2": f"b {i}",
                                     "Incorrect Answer 3": f"c {i}"}) + "\n"
                         for i in range(9)))
    specs, info = build_lm_eval_tasks("gpqa", f)
    (task,) = _leaves(get_task_dict(specs, info["task_manager"])).values()
    docs = list(task.eval_docs)
    assert sorted(d["Question"] for d in docs) == sorted(f"q{i}" for i in range(9)), docs[:2]
    assert info["source"] == str(f)


def test_kept_answers_survive_a_line_cut_by_the_kill(tmp_path):
    """codeeval.generate_kept: answers already in the progress file are read back, a last line cut mid-write is
    decoded again, and the file stays one JSON record per line."""
    import json

    from fastdllm_core.evaluation.codeeval import generate_kept

    class Lm:
        asked: list = []

        def generate_texts(self, prompts, names=None, on_done=None, **kw):
            self.asked.append(list(prompts))
            for i, p in enumerate(prompts):
                on_done(i, p.upper())

    path = tmp_path / "p.code.jsonl"
    lm = Lm()
    assert generate_kept(lm, ["a", "b"], path, max_new_tokens=8) == ["A", "B"]
    path.write_text(path.read_text() + '{"key": "cut mid-wr')  # the kill
    assert generate_kept(lm, ["a", "b", "c"], path, max_new_tokens=8) == ["A", "B", "C"]
    assert lm.asked == [["a", "b"], ["c"]]
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[-1])["text"] == "C"
    assert generate_kept(lm, ["c"], path, max_new_tokens=16) == ["C"] and lm.asked[-1] == ["c"]  # another length
