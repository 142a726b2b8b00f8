"""harness.corpora chat input: iter_conversations (JSONL `messages`, Parquet `messages`)
and iter_conversation_batches, with errors that name the file and the line or row; and
the Parquet `text` column errors."""
from __future__ import annotations

import gzip
import json

import pytest

from harness.corpora import (InputError, conversation_bytes, iter_conversation_batches,
                             iter_conversations, iter_documents)

CONVS = [
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello ☺"}],
    [],
    [{"role": "user", "content": ""}, {"role": "assistant", "content": "x" * 300}],
]


def jsonl(convs, extra: str = "") -> bytes:
    return ("".join(json.dumps({"messages": c, "id": k}) + "\n" for k, c in enumerate(convs))
            + extra).encode()


@pytest.mark.parametrize("suffix", ["jsonl", "jsonl.gz"])
def test_jsonl_conversations(tmp_path, suffix):
    data = jsonl(CONVS, "\n")
    p = tmp_path / f"c.{suffix}"
    p.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    assert list(iter_conversations(p)) == CONVS
    assert conversation_bytes(CONVS[0]) == len("Be brief.Hi") + len("Hello ☺".encode())


@pytest.mark.filterwarnings("ignore::harness.corpora.NullsSkipped")   # nulls on purpose; tests/test_inputs.py checks the note
def test_parquet_conversations(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"messages": CONVS + [None], "n": [1, 2, 3, 4]}), p,
                   row_group_size=2)
    assert list(iter_conversations(p, batch_rows=1)) == CONVS


def test_iter_conversation_batches(tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_bytes(jsonl(CONVS))
    b = tmp_path / "b.jsonl"
    b.write_bytes(jsonl(CONVS[:1]))
    batches = list(iter_conversation_batches([a, b], batch_bytes=100))
    assert [len(x) for x in batches] == [3, 1]                # 320 bytes, then 20
    assert [c for x in batches for c in x] == CONVS + CONVS[:1]
    empty = tmp_path / "e.jsonl"
    empty.write_bytes(b"\n")
    with pytest.raises(InputError, match="e.jsonl: is empty \\(no conversations\\)"):
        list(iter_conversation_batches([a, empty]))


@pytest.mark.parametrize("line, needle", [
    ('{"messages": [{"role": "user"', "c.jsonl:2: not valid JSON"),
    ('{"text": "no messages"}', "c.jsonl:2: no 'messages' list"),
    ('{"messages": "hello"}', "c.jsonl:2: no 'messages' list"),
    ('[1]', "c.jsonl:2: no 'messages' list"),
    ('{"messages": ["hi"]}', "c.jsonl:2: message 0 is not an object"),
    ('{"messages": [{"content": "hi"}]}', "c.jsonl:2: message 0 has no string 'role'"),
    ('{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": 5}]}',
     "c.jsonl:2: message 1 has no string 'content'"),
    ('{"messages": [{"role": "robot", "content": "hi"}]}',
     "c.jsonl:2: message 0 has unknown role 'robot' (expected one of user, assistant, "
     "system)"),
])
def test_jsonl_conversation_errors(tmp_path, line, needle):
    p = tmp_path / "c.jsonl"
    p.write_bytes(jsonl(CONVS[:1]) + line.encode() + b"\n")
    with pytest.raises(InputError) as e:
        list(iter_conversations(p))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_any_role_when_roles_is_none(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_bytes(b'{"messages": [{"role": "robot", "content": "hi"}]}\n')
    assert list(iter_conversations(p, roles=None)) == [[{"role": "robot", "content": "hi"}]]


def test_parquet_conversation_errors(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    bad_role = tmp_path / "r.parquet"
    pq.write_table(pa.table({"messages": CONVS + [[{"role": "bot", "content": "x"}]]}),
                   bad_role, row_group_size=2)
    with pytest.raises(InputError, match=r"r\.parquet: row 3: message 0 has unknown role"):
        list(iter_conversations(bad_role))
    no_col = tmp_path / "t.parquet"
    pq.write_table(pa.table({"text": ["a"]}), no_col)
    with pytest.raises(InputError, match=r"t\.parquet: no 'messages' column \(columns: text\)"):
        list(iter_conversations(no_col))
    wrong = tmp_path / "w.parquet"
    pq.write_table(pa.table({"messages": ["a string"]}), wrong)
    with pytest.raises(InputError, match="column 'messages' holds string"):
        list(iter_conversations(wrong))


def test_chat_needs_jsonl_or_parquet(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("hello")
    with pytest.raises(InputError, match="c.txt: chat input must be JSONL"):
        iter_conversations(p)


def test_parquet_without_text_column(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    p = tmp_path / "m.parquet"
    pq.write_table(pa.table({"messages": CONVS, "id": [1, 2, 3]}), p)
    with pytest.raises(InputError, match=r"m\.parquet: no 'text' column \(columns: "
                                         r"messages, id\)"):
        list(iter_documents(p))
