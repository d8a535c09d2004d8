"""Arbitrary lines thrown at both readers of training rows (fastdllm_core.training.row_reader; Hypothesis): training's
reader names every line it refuses (file and line) and every row it accepts encodes, with a character tokenizer
and a byte-level BPE under a Qwen2.5-style chat template; the adaptation build skips and counts every malformed
line by reason and never fails on one."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastdllm_core.training import adaptation_data as ad
from fastdllm_core.training.data import DataError, check_train_files, encode_example, iter_rows
from fastdllm_core.training.row_reader import MAX_LINE_BYTES

# Qwen2.5-Instruct's chat template without its tools branch: a default system prompt when the first message is
# not one, a system message elsewhere rendered as a turn, roles it does not know dropped
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if (message.role == 'user') or (message.role == 'system' and not loop.first)"
    " or (message.role == 'assistant') %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>'"
    " + '\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])

ODD_TEXT = st.sampled_from(["", " ", "\x00", "\ud800", "a\udfffb", "\ufeff", "\r\n", "<|im_end|>", "|<MASK>|",
                            "\u2028", "e\u0301", "\U0001F600" * 3, "{{ x }}", "{% if %}"])
TEXT = st.text(max_size=12) | ODD_TEXT
SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2**70) |
           st.floats(allow_nan=True, allow_infinity=True) | TEXT)
JSON = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(TEXT, kids, max_size=3),
                    max_leaves=12)
ROLE = st.sampled_from(["user", "assistant", "system", "tool", "", "USER", "function"]) | SCALARS
MESSAGE = st.fixed_dictionaries({"role": ROLE, "content": TEXT | JSON},
                                optional={"tool_calls": JSON, "name": JSON}) | JSON
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]),
                                           "content": TEXT}), min_size=1, max_size=5) | st.lists(MESSAGE, max_size=4)
TRAINING_ROW = (st.fixed_dictionaries({"messages": MESSAGES | JSON}, optional={"text": TEXT | JSON})
                | st.fixed_dictionaries({"prompt": TEXT | JSON, "response": TEXT | JSON})
                | st.fixed_dictionaries({"text": TEXT | JSON}) | JSON)
NEMOTRON_ROW = st.fixed_dictionaries(
    {"input": MESSAGES | JSON, "output": TEXT | JSON, "reasoning": st.sampled_from(["on", "off", "maybe"]) | SCALARS},
    optional={"system_prompt": TEXT | JSON, "category": JSON}) | JSON

SPECIAL = st.sampled_from([
    b"[" * 100_000, b"[" * 900 + b"]" * 900, b'{"a": ' * 5000 + b"1" + b"}" * 5000,
    b'{"text": "a", "n": ' + b"7" * 5000 + b"}", b'{"prompt": "a", "response": "b", "n": -' + b"9" * 4400 + b"}",
    b'{"text": 1' + b"0" * 400 + b"}", b"1e99999", b"NaN", b"-Infinity", b'{"prompt": NaN, "response": "x"}',
    b'\xef\xbb\xbf{"text": "bom"}', b"\xef\xbb\xbf", b'{"text": "crlf"}\r', b"\x00", b'{"text": "\x00"}',
    b'{"text": "\\u0000"}', b'"\\ud800"', b'{"text": "\\ud800"}', b'{"prompt": "\\udc00", "response": "x"}',
    b'{"text": "\xed\xa0\x80"}', b'{"text": "\xff"}', b"\xc3", b'{"text": "a"} {"text": "b"}', b"{}", b"[]",
    b"null", b'"text"', b'{"text": ""}', b'{"messages": []}', b'{"messages": [{"role": "assistant", "content": "x"}]}',
    b'{"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "t"}, '
    b'{"role": "assistant", "content": "x"}]}', b'{"prompt": "a", "response": "b", "prompt": 3}',
    b'{"input": [{"role": "user", "content": "q"}], "output": "a", "reasoning": "off"}',
    b'{"input": [{"role": "user", "content": "q"}], "output": "a"}', b"\t \x0b\x0c", b"\r",
])


def _dump(v) -> bytes:
    try:
        return json.dumps(v).encode()
    except ValueError:  # an integer of more than 4300 digits
        return b"0"


LINE = (st.binary(max_size=60) | JSON.map(_dump) | TRAINING_ROW.map(_dump) | NEMOTRON_ROW.map(_dump)
        | NEMOTRON_ROW.map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass")) | SPECIAL)


@pytest.fixture(scope="module")
def tokenizers():
    from fastdllm_core.tiny import bpe_tokenizer, char_tokenizer

    bpe = bpe_tokenizer(["user\nWhat is 2 + 2?", "assistant\n4", "system\nYou are Qwen"] * 20, 300)
    bpe.chat_template = QWEN25_TEMPLATE
    return [char_tokenizer(), bpe]


def _lines_counted(data: bytes) -> int:
    """Lines with something on them (a leading byte order mark and whitespace do not count)."""
    return sum(1 for x in data.split(b"\n") if (x[3:] if x.startswith(b"\xef\xbb\xbf") else x).strip())


@SETTINGS
@given(line=TRAINING_ROW.map(_dump) | LINE)
def test_every_line_is_named_or_a_row_that_encodes(tmp_path, tokenizers, line):
    f = tmp_path / "train.jsonl"
    f.write_bytes(b'{"prompt": "1+1=?", "response": "2"}\n' + line + b"\n")
    try:
        rows = list(iter_rows(f))
    except DataError as exc:
        assert str(exc).startswith(f"{f}:2: "), str(exc)  # the file, the line, the reason
        return
    assert len(rows) == _lines_counted(f.read_bytes())
    for _, row in rows:
        for tok in tokenizers:  # accepted by the check => encoded, with labels on the answer
            ids, labels = encode_example(tok, row)
            assert len(ids) == len(labels) > 0 and any(t != -100 for t in labels)


CONVERSATION = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool", ""]),
                                               "content": TEXT}), min_size=1, max_size=5)


@SETTINGS
@given(messages=CONVERSATION)
def test_every_conversation_is_named_or_encodes(tmp_path, tokenizers, messages):
    test_every_line_is_named_or_a_row_that_encodes.hypothesis.inner_test(
        tmp_path, tokenizers, json.dumps({"messages": messages}).encode())


@SETTINGS
@given(lines=st.lists(LINE, min_size=1, max_size=6))
def test_a_file_of_any_lines_is_read_or_refused_naming_a_line(tmp_path, lines):
    f = tmp_path / "train.jsonl"
    f.write_bytes(b"\n".join(lines))
    try:
        n = check_train_files([str(f)])
    except DataError as exc:
        assert re.match(rf"({re.escape(str(f))}:\d+: |the training dataset is empty)", str(exc)), str(exc)
        return
    assert n == _lines_counted(f.read_bytes())


@SETTINGS
@given(lines=st.lists(LINE, min_size=1, max_size=6), reasoning=st.sampled_from(["off", "all"]))
def test_adaptation_index_skips_and_counts_every_malformed_line(tmp_path, lines, reasoning):
    root = tmp_path / "src"
    (root / "SFT" / "math").mkdir(parents=True, exist_ok=True)
    data = b"\n".join(lines)
    (root / "SFT" / "math" / "part.jsonl").write_bytes(data)
    c = ad.resolve({"local_dir": str(root), "subsets": ["math"], "reasoning": reasoning})
    idx = ad.subset_index(root, "math", c)
    assert sum(idx["malformed_reasons"].values()) == idx["malformed_rows"]
    assert not any(k.startswith("unexpected") for k in idx["malformed_reasons"]), idx["malformed_examples"]
    assert len(idx["malformed_examples"]) == min(idx["malformed_rows"], ad.MALFORMED_EXAMPLES)
    if reasoning == "all":  # every line is eligible or malformed
        assert idx["eligible_rows"] + idx["malformed_rows"] == _lines_counted(data)


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(NEMOTRON_ROW.map(_dump) | LINE, min_size=1, max_size=6))
def test_adaptation_build_never_fails_on_a_row(tmp_path, tokenizers, lines):
    root = tmp_path / "src"
    (root / "SFT" / "math").mkdir(parents=True, exist_ok=True)
    good = b'{"input": [{"role": "user", "content": "q"}], "output": "a", "reasoning": "off"}'
    data = b"\n".join([good, *lines])
    (root / "SFT" / "math" / "part.jsonl").write_bytes(data)
    out = tmp_path / "out" / "a.jsonl"
    out.parent.mkdir(exist_ok=True)
    m = ad.build({"local_dir": str(root), "subsets": ["math"], "token_budget": 10**9, "reasoning": "all"},
                 tokenizers[1], out, progress=False, processes=1)
    st_ = m["subsets"]["math"]
    assert m["rows"] == len(out.read_bytes().splitlines()) == st_["rows"] >= 1
    assert st_["rows"] + st_["malformed_rows"] == _lines_counted(data)
    assert m["malformed_reasons"] == st_["malformed_reasons"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["a.jsonl", "a.jsonl.manifest.json"]  # no temporaries


def test_a_line_longer_than_the_limit_is_a_reason_and_is_not_read_whole(tmp_path, monkeypatch):
    import fastdllm_core.training.row_reader as rows

    monkeypatch.setattr(rows, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(rows, "_CHUNK", 64)
    f = tmp_path / "x.jsonl"
    f.write_bytes(b'{"text": "a"}\n{"text": "' + b"x" * 5000 + b'"}\n{"text": "b"}\n')
    got = list(rows.lines(f))
    assert [n for n, _, _ in got] == [1, 2, 3] and got[2][1] == 14 + 5000 + 13
    assert isinstance(got[1][2], rows.RowError) and got[1][2].kind == rows.TOO_LONG
    with pytest.raises(DataError, match=rf"{f}:2: a line of more than 1000 bytes"):
        list(iter_rows(f))
    assert MAX_LINE_BYTES == 64 * 2**20
