"""Bad data is named (file, line, field) before any model is loaded, and nothing is left behind:
evaluation data (run_task, ``fastdllm eval``) and training data (``fastdllm train``)."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from fastdllm_core import synthetic
from fastdllm_core.evaluation import run_task
from fastdllm_core.evaluation.datacheck import DataError


@pytest.fixture(autouse=True)
def _no_model_load(monkeypatch):
    """Any model load fails the test: every error below must come first."""
    def boom(*a, **k):
        raise AssertionError("the model was loaded before the data was checked")

    import fastdllm_core.evaluation.runner as runner
    import fastdllm_core.loading as model
    import fastdllm_core.training.loop as loop

    monkeypatch.setattr(runner, "load_model", boom)
    monkeypatch.setattr(model, "load_model", boom)
    monkeypatch.setattr(loop, "build_model", boom)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def _write(path: Path, lines: list[str]) -> Path:
    text = "".join(line + "\n" for line in lines)
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return synthetic.write_suite(tmp_path_factory.mktemp("suite"), n_pretrain=0, n_sft=10, n_adapt=0, n_eval=3)


def _good_lines(suite, task):
    if task == "synth_arith":
        return Path(suite["synth_arith_test"]).read_text().splitlines()
    with gzip.open(suite["synth_code_test"], "rt") as fh:
        return fh.read().splitlines()


def _break(lines, how, field):
    lines = list(lines)
    if how == "not_json":
        lines[1] = lines[1][:-5]
    elif how == "missing":
        row = json.loads(lines[1])
        del row[field]
        lines[1] = json.dumps(row)
    elif how == "wrong_type":
        row = json.loads(lines[1])
        row[field] = 42
        lines[1] = json.dumps(row)
    elif how == "not_object":
        lines[1] = json.dumps([1, 2])
    return lines


CASES = [("not_json", "line 2", r"not valid JSON"), ("missing", "field", r"is missing"),
         ("wrong_type", "field", r"must be a string"), ("not_object", "", r"must be a JSON object")]


@pytest.mark.parametrize("task,field,suffix", [("synth_arith", "question", ".jsonl"),
                                                ("synth_code", "prompt", ".jsonl.gz")])
@pytest.mark.parametrize("how,_,pattern", CASES)
def test_bad_eval_data_is_named_before_the_model_loads(tmp_path, suite, task, field, suffix, how, _, pattern):
    bad = _write(tmp_path / f"bad{suffix}", _break(_good_lines(suite, task), how, field))
    out = tmp_path / "out"
    with pytest.raises(DataError, match=pattern) as ei:
        run_task("/some/model", task, out_dir=out, data_path=str(bad))
    msg = str(ei.value)
    assert f"{bad}:2:" in msg
    if how in ("missing", "wrong_type"):
        assert repr(field) in msg
    assert not out.exists(), "a failed run left its output directory (or evalplus/) behind"


@pytest.mark.parametrize("task,name", [("synth_arith", "empty.jsonl"), ("synth_code", "empty.jsonl.gz"),
                                       ("humaneval", "empty.jsonl"), ("gsm8k", "empty.jsonl")])
def test_empty_eval_file_fails_before_the_model_loads(tmp_path, task, name):
    empty = _write(tmp_path / name, [])
    out = tmp_path / "out"
    with pytest.raises(DataError, match=f"{empty}: the {task} data file is empty"):
        run_task("/some/model", task, out_dir=out, data_path=str(empty))
    assert not out.exists()


def test_humaneval_original_form_fields(tmp_path):
    row = {"task_id": "HumanEval/0", "prompt": "def f():\n", "canonical_solution": "  return 1\n",
           "entry_point": "f"}
    bad = _write(tmp_path / "he.jsonl", [json.dumps(row)])
    with pytest.raises(DataError, match=rf"{bad}:1: field 'test' is missing"):
        run_task("/some/model", "humaneval", out_dir=tmp_path / "out", data_path=str(bad))


def test_cli_eval_names_the_bad_line(tmp_path, suite, capsys):
    from fastdllm_core.cli import main

    bad = _write(tmp_path / "bad.jsonl", _break(_good_lines(suite, "synth_arith"), "missing", "answer"))
    rc = main(["eval", "--model", "/some/model", "--task", "synth_arith", "--data-path", str(bad),
               "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and f"{bad}:2: field 'answer' is missing" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("line,pattern", [
    ('{"prompt": "a", "response": "b"', r":2: not valid JSON"),
    ('{"prompt": "a"}', r":2: an SFT row needs 'messages' or 'prompt'\+'response'"),
    ('{"prompt": "a", "response": 7}', r":2: field 'response' must be a string"),
    ('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant"}]}',
     r":2: field 'messages\[1\].content' must be a string"),
    ('{"messages": [{"role": "user", "content": "a"}]}', r":2: field 'messages': .*must end with an assistant"),
    ('[1, 2]', r":2: an SFT row must be a JSON object"),
    ('"a string"', r":2: an SFT row must be a JSON object, got str"),
    ('{"messages": [{"role": "assistant", "content": "x"}]}',
     r":2: field 'messages': the assistant turn messages\[0\] has no user turn before it"),
    ('{"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "x"}]}',
     r":2: field 'messages': the assistant turn messages\[1\] has no user turn"),
    ('{"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "t"}, '
     '{"role": "assistant", "content": "x"}]}', r":2: field 'messages\[1\].role' must be one of 'system', 'user'"),
    ('{"messages": [{"role": "user", "content": "a"}, {"role": 7, "content": "x"}]}',
     r":2: field 'messages\[1\].role' must be a string, got int"),
    ('{"prompt": "\\ud800", "response": "b"}', r":2: field 'prompt' is not valid Unicode text \(a lone surrogate"),
    ('{"text": "a\\udfff"}', r":2: field 'text' is not valid Unicode text"),
    ('{"prompt": "a", "response": NaN}', r":2: field 'response' must be a string, got float"),
    ('[' * 50000 + ']' * 50000, r":2: not valid JSON for this reader: nested too deeply"),
    ('{"messages": ' + '[' * 5000 + ']' * 5000 + '}', r":2: not valid JSON for this reader: nested too deeply"),
    ('{"messages": [' + '[' * 500 + ']' * 500 + ']}', r":2: field 'messages\[0\]' must be an object"),
    ('{"prompt": "a", "response": "b"} x', r":2: not valid JSON \(Extra data"),
    ('\x00', r":2: not valid JSON"),
    (json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}] * 501}),
     r":2: field 'messages' has 1002 turns, more than 1000"),
])
def test_bad_training_data_is_named_before_the_model_is_built(tmp_path, line, pattern):
    from fastdllm_core.training.loop import train

    f = _write(tmp_path / "sft.jsonl", ['{"prompt": "1+1=?", "response": "2"}', line])
    cfg = {"data": {"train_files": [str(f)], "seq_len": 64}, "objective": {"block_size": 16},
           "optim": {"max_steps": 1, "batch_size": 2, "micro_batch_size": 2}}
    with pytest.raises(ValueError, match=pattern) as ei:
        train(cfg, tmp_path / "run", progress=False)
    assert str(f) in str(ei.value)
    assert not (tmp_path / "run").exists()


def test_bytes_that_are_not_utf8_are_named_with_their_line(tmp_path):
    from fastdllm_core.training.loop import train

    f = tmp_path / "sft.jsonl"
    f.write_bytes(b'\xef\xbb\xbf{"prompt": "1+1=?", "response": "2"}\r\n\r\n{"prompt": "a\xff", "response": "b"}\n')
    with pytest.raises(ValueError, match=rf"{f}:3: not valid UTF-8 \(at byte 13 of the line: b'\\xff'\)"):
        train(_train_cfg(f), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_row_the_tokenizer_refuses_is_named_before_the_model_and_nothing_is_left(tmp_path, monkeypatch, capsys):
    """What only the tokenizer (or its chat template) can refuse is named by the token store's build, which comes
    before the model is loaded: file, line, reason, one line from ``fastdllm train``."""
    import yaml

    import fastdllm_core.training.data as data
    from fastdllm_core.cli import train as train_cli
    from fastdllm_core.training.loop import train

    template = data._template

    def picky(tokenizer, messages, add_generation_prompt):
        if any("BOOM" in m["content"] for m in messages):
            raise RuntimeError("the template cannot render BOOM")
        return template(tokenizer, messages, add_generation_prompt)

    monkeypatch.setattr(data, "_template", picky)
    f = _write(tmp_path / "sft.jsonl", ['{"prompt": "1+1=?", "response": "2"}', '{"prompt": "BOOM", "response": "b"}'])
    pattern = rf"{f}:2: cannot be encoded \(RuntimeError: the template cannot render BOOM\)"
    with pytest.raises(ValueError, match=pattern):
        train(_train_cfg(f), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(_train_cfg(f)))
    assert train_cli.main(["--config", str(tmp_path / "c.yaml"), "--output-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert re.search(pattern, err) and "Traceback" not in err and err.count("fastdllm train: error:") == 1, err
    assert not (tmp_path / "run").exists()


def test_empty_training_file_names_the_files(tmp_path):
    from fastdllm_core.training.loop import train

    f = _write(tmp_path / "sft.jsonl", [])
    cfg = {"data": {"train_files": [str(f)], "seq_len": 64}, "objective": {"block_size": 16},
           "optim": {"max_steps": 1, "batch_size": 2, "micro_batch_size": 2}}
    with pytest.raises(ValueError, match=f"training dataset is empty.*{f}"):
        train(cfg, tmp_path / "run", progress=False)


def _train_cfg(f):
    return {"data": {"train_files": [str(f)], "seq_len": 64}, "objective": {"block_size": 16},
            "optim": {"max_steps": 1, "batch_size": 2, "micro_batch_size": 2}}


@pytest.mark.parametrize("lines,pattern", [
    (['{"prompt": "1+1=?", "response": "2"}', '{"prompt": "a", "response": 7}'],
     r"sft\.jsonl:2: field 'response' must be a string, got int"),
    (['{"prompt": "1+1=?", "response": "2"', ''], r"sft\.jsonl:1: not valid JSON"),
    ([], r"the training dataset is empty: no rows in data\.train_files \['.*sft\.jsonl'\]"),
])
def test_cli_train_names_bad_data_in_one_line(tmp_path, capsys, lines, pattern):
    """``fastdllm train``: one line naming file, line and field, exit code 2, no traceback, no run directory."""
    import re

    import yaml

    from fastdllm_core.cli import train as train_cli

    f = _write(tmp_path / "sft.jsonl", lines)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(_train_cfg(f)))
    assert train_cli.main(["--config", str(tmp_path / "c.yaml"), "--output-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fastdllm train: error: ") and len(err.strip().splitlines()) == 1, err
    assert re.search(pattern, err) and str(f) in err
    assert not (tmp_path / "run").exists()


def test_dag_training_job_names_bad_data_before_writing_its_run_dir(tmp_path, monkeypatch):
    """The DAG's training script (several training processes of their own otherwise) checks the data first."""
    import runpy
    import sys
    from types import SimpleNamespace

    import fastdllm_core.training.launch as launch

    monkeypatch.setattr(launch, "train_processes", lambda *a, **k: pytest.fail("training processes started"))
    f = _write(tmp_path / "sft.jsonl", ['{"prompt": "1+1=?", "response": "2"}', '{"messages": "hi"}'])
    scripts = Path(__file__).resolve().parent.parent / "workflow" / "scripts"
    monkeypatch.syspath_prepend(str(scripts))
    cfg = _train_cfg(f)
    cfg["train"] = {"device": "cpu"}
    run_dir = tmp_path / "models" / "m" / "run"
    sm = SimpleNamespace(params=SimpleNamespace(cfg=cfg, run_dir=str(run_dir), recipe="bd_pad"),
                         wildcards=SimpleNamespace(model="m"), config={"gpu": False, "device": "cpu"}, threads=2,
                         output=SimpleNamespace(metrics=str(tmp_path / "metrics.csv")), log=[], rule="train_model",
                         scriptdir=str(scripts))
    with pytest.raises(ValueError, match=rf"{f}:2: field 'messages'"):
        runpy.run_path(str(scripts / "train_model.py"), init_globals={"snakemake": sm})
    assert not run_dir.exists() and not (tmp_path / "models").exists()
    assert "fastdllm_dag.job.common" in sys.modules  # the script really ran up to its data check


def test_a_training_file_that_vanishes_or_is_not_a_file_is_named(tmp_path):
    from fastdllm_core.training.config import TrainConfig
    from fastdllm_core.training.data import DataError, check_train_files
    from fastdllm_core.training.loop import train
    from fastdllm_core.training.store_key import data_digest

    f = _write(tmp_path / "sft.jsonl", ['{"prompt": "1+1=?", "response": "2"}'])
    link = tmp_path / "link.jsonl"
    link.symlink_to(f)
    assert check_train_files([str(link)]) == 1 and data_digest([link]) == data_digest([f])
    with pytest.raises(DataError, match=f"{tmp_path}: not a regular file"):
        check_train_files([str(tmp_path)])
    config = TrainConfig.from_dict(_train_cfg(f))
    f.unlink()  # gone between the config's check and the run
    with pytest.raises(FileNotFoundError, match=f"training data file not found: {f}"):
        train(config, tmp_path / "run", progress=False)
    with pytest.raises(FileNotFoundError, match=f"training data file not found: {f}"):
        train(config, tmp_path / "run", progress=False, data_checked=True)  # the store's key reads it first
    assert not (tmp_path / "run").exists()
