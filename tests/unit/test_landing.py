"""cdclake.landing: input framing (pure, local) and landing into a raw zone on a real S3-API server over HTTP.

Oracles are the literal inputs of each test: line numbers are counted by hand in the literals, byte offsets are
found by searching the encoded input for the document's first bytes, and S3 objects are read back with an
independent boto3 client rather than through cdclake's store.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import zstandard

from cdclake import pipeline
from cdclake.exceptions import InputError
from cdclake.landing import (
    RAW_FIELDS,
    InputFile,
    batch_raw_paths,
    detect_framing,
    frame_messages,
    land_files,
    list_batches,
    read_manifest,
    resolve_inputs,
)
from cdclake.settings import LakeSettings
from tests.support.s3_server import S3Bucket

SOURCE = "shop"


def frame(text: str, framing: str = "auto", uri: str = "in.json", file_index: int = 0) -> list[dict[str, Any]]:
    return list(frame_messages(text, framing=framing, input_uri=uri, file_index=file_index))


def offset_of(text: str, start: str, occurrence: int = 0) -> int:
    """Byte offset of the occurrence-th ``start`` in the UTF-8 encoding of ``text`` (the test's own oracle)."""
    data, needle = text.encode("utf-8"), start.encode("utf-8")
    at = -1
    for _ in range(occurrence + 1):
        at = data.index(needle, at + 1)
    return at


# --- framing: JSON Lines ----------------------------------------------------------------------------------------


def test_jsonl_one_message_per_line_with_lines_and_byte_offsets() -> None:
    text = '{"id": 1}\n\n{"name": "Zoë"}\r\n   \n{"id": 3}'  # blank lines, CRLF, no final newline
    records = frame(text, uri="/in/a.jsonl", file_index=2)

    assert [r["value"] for r in records] == ['{"id": 1}', '{"name": "Zoë"}', '{"id": 3}']
    assert [r["line"] for r in records] == [1, 3, 5]
    assert [r["byte_offset"] for r in records] == [0, offset_of(text, '{"name"'), offset_of(text, '{"id": 3}')]
    assert [r["index"] for r in records] == [0, 1, 2]
    for r in records:
        assert set(r) == set(RAW_FIELDS)
        assert (r["input"], r["file_index"], r["framing"], r["error"]) == ("/in/a.jsonl", 2, "jsonl", None)
        assert (r["topic"], r["partition"], r["offset"], r["timestamp"], r["headers"], r["key"]) == (None,) * 6


def test_jsonl_keeps_lines_that_are_not_json_for_normalization_to_judge() -> None:
    records = frame('{"id": 1}\nnot json at all\n', framing="jsonl")
    assert [(r["value"], r["line"], r["error"]) for r in records] == [
        ('{"id": 1}', 1, None), ("not json at all", 2, None)]


def test_jsonl_line_of_concatenated_documents_is_one_message_per_document() -> None:
    # feldera's JSON parser tests feed a Debezium chunk of two events on one line ("debezium: one chunk, two
    # records"): Spark's JSON reader takes the first document of a value and drops the rest without a word, so the
    # second change (here a delete) was lost. Each document is a message of its own, at that line.
    create = '{"payload": {"op": "c", "after": {"b": true, "i": 0}}}'
    delete = '{"payload": {"op": "d", "before": {"b": false, "i": 100, "s": "}{"}}}'
    text = '{"id": 0}\n' + create + delete + '\n  {"id": 1} {"id": 2}  trailing\n{"s": "}{"}\n'
    records = frame(text)

    assert [r["framing"] for r in records] == ["jsonl"] * 7
    assert [r["value"] for r in records] == [
        '{"id": 0}', create, delete, '{"id": 1}', '{"id": 2}', "trailing", '{"s": "}{"}']
    assert [r["line"] for r in records] == [1, 2, 2, 3, 3, 3, 4]
    assert [r["index"] for r in records] == list(range(7))
    assert [r["byte_offset"] for r in records] == [
        0, offset_of(text, create), offset_of(text, delete), offset_of(text, '  {"id": 1}'),  # (the line's start)
        offset_of(text, '{"id": 2}'), offset_of(text, "trailing"), offset_of(text, '{"s"')]
    assert all(r["error"] is None for r in records)


def test_jsonl_line_of_many_documents_lands_in_linear_time_with_each_documents_byte_offset() -> None:
    # Each document's byte offset was counted again from the line's start, so a line of n documents took n^2 time
    # (16000 small documents: over a minute). The offsets count multi-byte characters before each document.
    docs = [json.dumps({"i": i, "s": "ü€" * (i % 3)}, ensure_ascii=False) for i in range(20000)]
    text = '{"id": 0}\n' + " ".join(docs) + "\n"
    records = frame(text)

    assert [r["value"] for r in records] == ['{"id": 0}', *docs]
    line = text.encode("utf-8")
    for i in (1, 2, 3, 4, 5, 19999):
        assert line[records[i + 1]["byte_offset"]:].startswith(docs[i].encode("utf-8")), i


def test_jsonl_line_too_deeply_nested_for_pythons_parser_is_one_message() -> None:
    # A brace followed by a letter makes the line parsed for concatenated documents; a RecursionError of the
    # parser escaped the landing instead of leaving the line, one message, to the JSON reader to judge.
    body = '{"a": ' + "[" * 5000 + "]" * 5000 + ', "s": "}x"}'
    assert [r["value"] for r in frame('{"id": 0}\n' + body + "\n")] == ['{"id": 0}', body]


def test_jsonl_line_with_a_json_text_in_a_string_is_not_parsed_for_more_documents(monkeypatch) -> None:
    # A JSON column's value in a Debezium image is escaped JSON text (`"{\\"a\\": {\\"b\\": 1}}"`): its
    # braces are followed by a quote or a backslash, never a document's first character, and must not make every
    # such line parsed in Python a second time.
    def no_parse(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the line was parsed")

    monkeypatch.setattr(json, "JSONDecoder", no_parse)
    body = json.dumps({"after": {"doc": json.dumps({"a": {"b": 1}, "t": "}\n"}), "c": "x"}})
    assert [r["value"] for r in frame(body + "\n", framing="jsonl")] == [body]


def test_jsonl_line_separators_inside_strings_do_not_split_messages() -> None:
    # U+2028/U+2029/U+0085 are legal raw characters inside JSON strings (serializers emit them unescaped);
    # only "\n" ends a JSON Lines record.
    text = '{"note": "a\u2028b\u2029c\u0085d"}\n{"id": 2}\n'
    records = frame(text)

    assert [r["framing"] for r in records] == ["jsonl", "jsonl"]
    assert [r["value"] for r in records] == ['{"note": "a\u2028b\u2029c\u0085d"}', '{"id": 2}']
    assert [r["line"] for r in records] == [1, 2]
    assert records[1]["byte_offset"] == offset_of(text, '{"id": 2}')
    assert json.loads(records[0]["value"]) == {"note": "a\u2028b\u2029c\u0085d"}


# --- framing: kcat -J envelopes ---------------------------------------------------------------------------------


KCAT = "\n".join([
    '{"topic": "dbserver1.inventory.customers", "partition": 0, "offset": 41, "tstype": "create", '
    '"ts": 1700000000123, "broker": 1, "headers": ["trace", "abc", "retry", "2", "empty", null], '
    '"key": "{\\"id\\":1001}", "payload": "{\\"op\\":\\"c\\"}"}',
    '{"topic": "dbserver1.inventory.customers", "partition": 1, "offset": 42, "ts": 1700000000456, '
    '"headers": {"trace": "def"}, "key": null, "payload": "{\\"op\\":\\"u\\"}"}',
    '{"topic": "dbserver1.inventory.customers", "partition": 1, "offset": 43, "ts": 1700000000789, '
    '"key": "{\\"id\\":1001}", "payload": null}',
    '{"topic": "t", "partition": 2, "offset": 44, "key": {"id": 7}, "payload": "v"}',
    '{"topic": "t", "partition": 2, "offset": 45, "key": 42, "payload": "w"}',
]) + "\n"


def test_detect_framing_from_the_first_non_blank_line() -> None:
    assert detect_framing("\n\n" + KCAT) == "kcat"
    assert detect_framing('\n  {"id": 1}\n{"id": 2}\n') == "jsonl"
    assert detect_framing('{\n  "id": 1\n}\n') == "json"
    assert detect_framing('[{"id": 1}, {"id": 2}]\n') == "json"
    assert detect_framing("") == "jsonl"


def test_kcat_envelopes_keep_kafka_coordinates_headers_key_and_payload() -> None:
    records = frame(KCAT)

    assert [r["framing"] for r in records] == ["kcat"] * 5
    assert [r["error"] for r in records] == [None] * 5
    assert [(r["topic"], r["partition"], r["offset"], r["timestamp"]) for r in records] == [
        ("dbserver1.inventory.customers", 0, 41, 1700000000123),
        ("dbserver1.inventory.customers", 1, 42, 1700000000456),
        ("dbserver1.inventory.customers", 1, 43, 1700000000789),
        ("t", 2, 44, None),
        ("t", 2, 45, None),
    ]
    # headers: a flat [name, value, ...] list and an object both become {name: value}
    assert records[0]["headers"] == {"trace": "abc", "retry": "2", "empty": None}
    assert records[1]["headers"] == {"trace": "def"}
    assert records[2]["headers"] is None
    assert records[0]["key"] == '{"id":1001}'
    assert records[1]["key"] is None  # null key
    assert records[0]["value"] == '{"op":"c"}'
    assert records[2]["value"] is None  # tombstone
    # a key that is JSON but not a string is kept as JSON text
    assert json.loads(records[3]["key"]) == {"id": 7}
    assert records[4]["key"] == "42"
    assert [r["line"] for r in records] == [1, 2, 3, 4, 5]
    assert [r["byte_offset"] for r in records] == [offset_of(KCAT, '{"topic"', i) for i in range(5)]



def test_kcat_payload_holding_several_documents_is_a_broken_message() -> None:
    payload = '{"op": "c", "after": {"id": 1}}{"op": "d", "before": {"id": 1}}'
    text = json.dumps({"topic": "t", "partition": 0, "offset": 5, "key": None, "payload": payload}) + "\n"
    [record] = frame(text, framing="kcat")

    assert (record["offset"], record["value"]) == (5, payload)
    assert record["error"].startswith("the Kafka record's value holds 2 JSON documents")

def test_kcat_line_that_is_not_an_envelope_is_a_broken_message() -> None:
    text = '{"topic": "t", "offset": 1, "payload": "ok"}\n{"id": 1}\n{"topic": "t", "offset": 3, "payload": \n'
    records = frame(text, framing="kcat")

    assert [r["line"] for r in records] == [1, 2, 3]
    assert records[0]["error"] is None
    assert "not a kcat -J envelope" in records[1]["error"]
    assert records[1]["value"] == '{"id": 1}'
    assert records[2]["error"].startswith("invalid kcat -J envelope JSON")



# --- framing: kafka-console-consumer output ---------------------------------------------------------------------


def test_console_consumer_fields_key_and_value_are_kept_apart() -> None:
    # kafka-console-consumer --property print.timestamp=true --property print.partition=true
    # --property print.offset=true --property print.headers=true --property print.key=true: each field, then a tab.
    # This file was one broken message (no line starts with a brace, so the JSON reader never found its footing).
    key = '{"schema":{"type":"struct","name":"dbserver1.inventory.customers.Key"},"payload":{"id":1001}}'
    value = '{"payload":{"op":"c","after":{"id":1001,"note":"tab\\there"}}}'
    text = (f"CreateTime:1700000000123\tPartition:0\tOffset:41\ttrace:abc,retry:2\t{key}\t{value}\n"
            f"CreateTime:1700000000456\tPartition:0\tOffset:42\tNO_HEADERS\t{key}\tnull\n"
            f"NO_TIMESTAMP\tPartition:1\tOffset:7\tNO_HEADERS\tnull\t{value}\n"
            "LogAppendTime:1700000000789\tPartition:1\tOffset:8\tNO_HEADERS\tcustomer-7\tnot json\n")
    assert detect_framing(text) == "console"
    records = frame(text)

    assert [r["framing"] for r in records] == ["console"] * 4
    assert [(r["partition"], r["offset"], r["timestamp"]) for r in records] == [
        (0, 41, 1700000000123), (0, 42, 1700000000456), (1, 7, None), (1, 8, 1700000000789)]
    assert [r["headers"] for r in records] == [{"trace": "abc", "retry": "2"}, None, None, None]
    # A comma in a header's JSON value (Debezium's old key of a key change, of two columns) stays in it.
    [moved] = frame('CreateTime:1\tOffset:3\t__debezium.oldkey:{"a":1,"b":"x,\\"y"},n:null\t{"a":2}\t{"op":"c"}\n')
    assert moved["headers"] == {"__debezium.oldkey": '{"a":1,"b":"x,\\"y"}', "n": None}
    assert (moved["key"], moved["value"]) == ('{"a":2}', '{"op":"c"}')
    assert [r["key"] for r in records] == [key, key, None, "customer-7"]
    assert [r["value"] for r in records] == [value, None, value, "not json"]
    assert [r["line"] for r in records] == [1, 2, 3, 4]
    assert records[1]["byte_offset"] == offset_of(text, "CreateTime:1700000000456")
    assert all(r["error"] is None for r in records)


def test_console_consumer_print_key_lines_without_other_fields_are_key_and_value() -> None:
    # The Debezium tutorials' `kafka-console-consumer --property print.key=true`: the key, a tab, the value. They
    # were read as two messages of one line, and the key was quarantined.
    key = '{"schema":{"type":"struct","name":"s.public.t.Key"},"payload":{"id":1}}'
    value = '{"schema":{"type":"struct"},"payload":{"op":"u","after":{"id":1}}}'
    text = f"{key}\t{value}\n{key}\tnull\n{value}\n"
    assert detect_framing(text) == "console"
    records = frame(text)

    assert [(r["key"], r["value"]) for r in records] == [(key, value), (key, None), (None, value)]
    assert [r["offset"] for r in records] == [None] * 3
    # A string converter's key (kcat -K'\t' prints keys the same way).
    records = frame('customer-7\t{"id": 7}\nnull\t{"id": 8}\r\n\t{"id": 9}\nempty\t\n')
    assert [(r["framing"], r["key"], r["value"]) for r in records] == [
        ("console", "customer-7", '{"id": 7}'), ("console", None, '{"id": 8}'), ("console", "", '{"id": 9}'),
        ("console", "empty", "")]


def test_console_consumer_value_holding_several_documents_is_a_broken_message() -> None:
    # The console consumer prints a record's value as it is: a value of two documents is one record, as a kcat
    # payload is, and must not land as its first document (the rest dropped without a word).
    text = ('CreateTime:1\tPartition:0\tOffset:5\t{"id":1}\t{"op":"c"}{"op":"d"}\n'
            '{"id":2}\t{"op":"c"} {"op":"u"}\n'
            'k3\t{"op":"c"}\n')
    records = frame(text, framing="console")

    assert [(r["key"], r["value"]) for r in records] == [
        ('{"id":1}', '{"op":"c"}{"op":"d"}'), ('{"id":2}', '{"op":"c"} {"op":"u"}'), ("k3", '{"op":"c"}')]
    assert [(r["error"] or "").startswith("the Kafka record's value holds 2 JSON documents") for r in records] == [
        True, True, False]
    assert records[2]["error"] is None


def test_console_consumer_value_with_a_raw_tab_in_a_string_is_not_split_into_a_key() -> None:
    # Without print.key the value follows the fields; a raw tab inside one of its strings (a DDL text, kept as the
    # JSON reader keeps raw control characters) is the value's, not a key separator.
    value = '{"op":"c","ddl":"ALTER TABLE t\tADD c int"}'
    records = frame(f"CreateTime:1\tPartition:0\tOffset:5\t{value}\nOffset:6\t{{\"id\":1}}\t{value}\n",
                    framing="console")

    assert [(r["offset"], r["key"], r["value"]) for r in records] == [(5, None, value), (6, '{"id":1}', value)]


def test_a_jsonl_line_of_two_documents_with_no_tab_between_stays_two_messages() -> None:
    assert detect_framing('{"id": 1}{"id": 2}\n') == "json"
    assert detect_framing('{"id": 1} {"id": 2}\n') == "json"
    assert [r["value"] for r in frame('{"id": 0}\n{"id": 1}\t{"id": 2}\n', framing="jsonl")] == [
        '{"id": 0}', '{"id": 1}', '{"id": 2}']

# --- framing: JSON documents ------------------------------------------------------------------------------------


def test_pretty_printed_documents_get_their_first_line_and_byte_offset() -> None:
    text = (
        '{\n'                       # 1
        '  "name": "Zoë Ångström",\n'  # 2  multi-byte characters before the next document
        '  "n": 1\n'                # 3
        '}\n'                       # 4
        '\n'                        # 5
        '{"second": "€"}\n'         # 6
        '  {\n'                     # 7  indented
        '    "third": true\n'       # 8
        '  },\n'                    # 9  comma between documents
        '{"fourth": 4} {"fifth": 5}\n'  # 10 two documents on one line
    )
    records = frame(text, uri="s3://b/in/docs.json")

    assert [r["framing"] for r in records] == ["json"] * 5
    assert [r["line"] for r in records] == [1, 6, 7, 10, 10]
    assert [r["byte_offset"] for r in records] == [
        0, offset_of(text, '{"second"'), offset_of(text, '{\n    "third"'), offset_of(text, '{"fourth"'),
        offset_of(text, '{"fifth"')]
    assert records[1]["byte_offset"] == len('{\n  "name": "Zoë Ångström",\n  "n": 1\n}\n\n'.encode("utf-8"))
    # the value is the document's own text, untouched
    assert records[0]["value"] == '{\n  "name": "Zoë Ångström",\n  "n": 1\n}'
    assert [json.loads(r["value"]) for r in records] == [
        {"name": "Zoë Ångström", "n": 1}, {"second": "€"}, {"third": True}, {"fourth": 4}, {"fifth": 5}]
    assert [r["index"] for r in records] == [0, 1, 2, 3, 4]
    assert all(r["error"] is None and r["input"] == "s3://b/in/docs.json" for r in records)


def test_json_array_of_messages_is_one_message_per_element() -> None:
    text = '\n[\n  {"id": 1, "name": "Zoë"},\n  {"id": 2},\n  "plain"\n]\n'
    records = frame(text)

    assert [r["framing"] for r in records] == ["json"] * 3
    assert [json.loads(r["value"]) for r in records] == [{"id": 1, "name": "Zoë"}, {"id": 2}, "plain"]
    assert [r["index"] for r in records] == [0, 1, 2]
    # elements are located at the array itself
    assert [(r["line"], r["byte_offset"]) for r in records] == [(2, 1)] * 3


@pytest.mark.parametrize("text", [
    '{"id": 1}\n{"id": 2}\n',  # JSON Lines
    '[{"id": 1},\n {"id": 2}]\n',  # an array
    '{\n  "id": 1\n}\n{\n  "id": 2\n}\n',  # pretty-printed documents
    '{"topic": "t", "offset": 1, "payload": "{\\"id\\": 1}"}\n'  # kcat -J
    '{"topic": "t", "offset": 2, "payload": "{\\"id\\": 2}"}\n',
])
def test_a_utf8_byte_order_mark_is_not_part_of_the_first_message(text: str) -> None:
    # Windows tools write UTF-8 with a BOM; `cat` of two such files puts one in the middle. RFC 8259 lets a parser
    # ignore it: the messages are read whole, and the framing is the one the text has without it.
    plain = frame(text)
    for marked in ("\ufeff" + text, "\ufeff" + text + "\ufeff" + text):
        records = frame(marked)
        assert [(r["value"], r["error"], r["framing"]) for r in records] == [
            (r["value"], None, r["framing"]) for r in plain * marked.count("\ufeff")]
        assert records[0]["line"] == 1
        assert marked.encode("utf-8")[records[0]["byte_offset"]:].lstrip(b"\xef\xbb\xbf\n[ ").startswith(b"{")


def test_json_array_of_kcat_envelopes_is_framed_as_kcat() -> None:
    text = json.dumps([
        {"topic": "t", "partition": 0, "offset": 5, "ts": 9, "key": None, "payload": '{"op":"d"}'},
        {"topic": "t", "partition": 0, "offset": 6, "ts": 10, "key": "k", "payload": None},
    ], indent=2)
    records = frame(text)

    assert [(r["framing"], r["offset"], r["key"], r["value"]) for r in records] == [
        ("kcat", 5, None, '{"op":"d"}'), ("kcat", 6, "k", None)]


def test_broken_document_is_kept_and_reading_resumes_at_the_next_document() -> None:
    text = (
        '{\n'            # 1
        '  "id": 1\n'    # 2
        '}\n'            # 3
        '{\n'            # 4  broken: a member without a value
        '  "id": 2,\n'   # 5
        '  "oops"\n'     # 6
        '}\n'            # 7
        '{\n'            # 8
        '  "id": 3\n'    # 9
        '}\n'            # 10
    )
    records = frame(text)

    assert [r["line"] for r in records] == [1, 4, 8]
    assert [r["byte_offset"] for r in records] == [
        0, offset_of(text, '{\n  "id": 2'), offset_of(text, '{\n  "id": 3')]
    assert [r["error"] is None for r in records] == [True, False, True]
    broken = records[1]
    assert broken["error"].startswith("invalid JSON: ")
    assert "Expecting ':' delimiter" in broken["error"]
    assert "line 7 column 1" in broken["error"]  # the parser's position, counted in the whole file
    assert broken["value"] == '{\n  "id": 2,\n  "oops"\n}'
    assert json.loads(records[2]["value"]) == {"id": 3}


def test_truncated_document_resumes_at_the_next_line_starting_with_a_brace() -> None:
    text = '{\n  "id": 1,\n  "name": "Zo\n{"id": 2}\ngarbage\n{"id": 3}\n'
    records = frame(text, framing="json")

    assert [r["line"] for r in records] == [1, 4, 5, 6]
    assert [r["error"] is not None for r in records] == [True, False, True, False]
    assert records[0]["value"] == '{\n  "id": 1,\n  "name": "Zo'
    # Raw newlines inside strings are allowed (CKafka prints DDL that way), so the parser reads on and fails later.
    assert records[0]["error"].startswith("invalid JSON: ")
    assert records[2]["value"] == "garbage"
    assert [json.loads(records[i]["value"]) for i in (1, 3)] == [{"id": 2}, {"id": 3}]
    assert records[3]["byte_offset"] == offset_of(text, '{"id": 3}')


@pytest.mark.parametrize("framing", ["auto", "jsonl", "kcat", "json"])
@pytest.mark.parametrize("text", ["", "\n", "  \r\n\t\n"])
def test_empty_input_has_no_messages(text: str, framing: str) -> None:
    assert frame(text, framing=framing) == []


def test_unknown_framing_is_an_input_error() -> None:
    with pytest.raises(InputError, match="'avro' is not one of auto, jsonl, kcat, console, json"):
        frame('{"id": 1}', framing="avro")


# --- inputs and landing, local raw zone ------------------------------------------------------------------------


@pytest.fixture()
def local_lake(tmp_path: Path) -> LakeSettings:
    return LakeSettings.from_env(tmp_path / "lake", env={})


def test_a_message_that_is_not_utf8_is_a_broken_message_and_the_rest_of_the_file_lands(
        local_lake: LakeSettings, tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes('{"id": 1}\n{"name": "Zoë"}\n{"id": 3, "name": "Eve"}\n'.encode("latin-1"))
    array = tmp_path / "array.json"  # the same byte in an array element, and a lone surrogate spelled as an escape
    array.write_bytes(b'[{"id": 4}, {"name": "Zo\xeb"}, {"name": "\\ud800"}]')

    landed = pipeline.land_inputs(local_lake, source=SOURCE, inputs=[str(latin1), str(array)])

    assert (landed.batch_id, landed.message_count) == ("00000001", 6)
    raw = [json.loads(line) for path in batch_raw_paths(local_lake, SOURCE, "00000001")
           for line in Path(path).read_text(encoding="utf-8").splitlines()]
    assert [(r["line"], r["byte_offset"]) for r in raw[:3]] == [(1, 0), (2, 10), (3, 26)]
    assert [r["value"] for r in raw] == [
        '{"id": 1}', '{"name": "Zo\\xEB"}', '{"id": 3, "name": "Eve"}',
        '{"id": 4}', '{"name": "Zo\\xEB"}', '{"name": "\ufffd"}']
    fix = "the input's encoding is not UTF-8: fix it at the producer, then land the message again"
    assert [r["error"] for r in raw] == [
        None, f"not UTF-8 text: byte 0xEB at character 12 of the message value (stored as \\xHH; {fix})", None,
        None, f"not UTF-8 text: byte 0xEB at character 12 of the message value (stored as \\xHH; {fix})",
        f"not UTF-8 text: lone surrogate U+D800 (a JSON escape of half a character) at character 10 of the message "
        f"value (stored as U+FFFD; {fix})"]
    manifest = read_manifest(local_lake, SOURCE, "00000001")
    assert [f["broken"] for f in manifest["files"]] == [1, 2]


def test_kcat_envelope_fields_that_are_not_utf8_make_the_message_broken_not_the_landing(
        local_lake: LakeSettings, tmp_path: Path) -> None:
    dump = tmp_path / "kcat.jsonl"
    dump.write_bytes(b'{"topic": "t\xe9", "offset": 1, "headers": ["h\xe9", "v\xe9"], "payload": "{}"}\n'
                     b'{"topic": "t", "offset": 2, "payload": "{}"}\n')

    landed = pipeline.land_inputs(local_lake, source=SOURCE, inputs=[str(dump)])

    raw = [json.loads(line) for path in batch_raw_paths(local_lake, SOURCE, landed.batch_id)
           for line in Path(path).read_text(encoding="utf-8").splitlines()]
    assert [(r["topic"], r["headers"], r["error"] is None) for r in raw] == [
        ("t\\xE9", {"h\\xE9": "v\\xE9"}, False), ("t", None, True)]
    assert raw[0]["error"].startswith("not UTF-8 text: byte 0xE9 at character 1 of the message topic")


def test_a_utf16_input_with_its_byte_order_mark_is_read_as_text(local_lake: LakeSettings, tmp_path: Path) -> None:
    exported = tmp_path / "powershell.json"  # Windows PowerShell 5's `>` writes UTF-16LE with a byte-order mark
    exported.write_bytes('{"id": 1, "name": "Zoë"}\r\n{"id": 2}\r\n'.encode("utf-16"))

    landed = pipeline.land_inputs(local_lake, source=SOURCE, inputs=[str(exported)])

    raw = [json.loads(line) for path in batch_raw_paths(local_lake, SOURCE, landed.batch_id)
           for line in Path(path).read_text(encoding="utf-8").splitlines()]
    assert [(r["value"], r["error"], r["line"]) for r in raw] == [
        ('{"id": 1, "name": "Zoë"}', None, 1), ('{"id": 2}', None, 2)]


def test_missing_input_path_is_an_input_error_naming_it(local_lake: LakeSettings, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "events.json"
    with pytest.raises(InputError) as info:
        resolve_inputs([str(missing)])
    assert str(missing) in str(info.value)
    with pytest.raises(InputError):
        pipeline.land_inputs(local_lake, source=SOURCE, inputs=[str(missing)])


def test_directory_inputs_are_every_visible_file_sorted(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    (inbox / "sub").mkdir(parents=True)
    (inbox / "b.json").write_text("{}")
    (inbox / "sub" / "a.json").write_text("{}")
    (inbox / ".partial").write_text("{")

    files = resolve_inputs([str(inbox)])

    assert [f.uri for f in files] == [str(inbox / "b.json"), str(inbox / "sub" / "a.json")]


def test_land_files_into_a_local_raw_zone(local_lake: LakeSettings) -> None:
    files = [InputFile("/in/a.jsonl", b'{"id": 1}\n{"id": 2}\n'), InputFile("/in/empty.json", b"")]
    batch_id, created, count, manifest_uri = land_files(local_lake, source=SOURCE, files=files)

    assert (batch_id, created, count) == ("00000001", True, 2)
    assert manifest_uri == str(local_lake.raw_root) + "/shop/manifests/00000001.json"
    manifest = json.loads(Path(manifest_uri).read_text())
    assert [(f["messages"], f["first_line"], f["last_line"]) for f in manifest["files"]] == [
        (2, 1, 2), (0, None, None)]
    paths = batch_raw_paths(local_lake, SOURCE, "00000001")
    assert paths == [str(Path(local_lake.raw_root) / "shop" / "batches" / "00000001" / f"part-0000{i}.jsonl")
                     for i in (0, 1)]
    assert Path(paths[1]).read_bytes() == b""


# --- landing into a raw zone on S3 ------------------------------------------------------------------------------


A_JSONL = '{"op": "c", "id": 1}\n\n{"op": "u", "id": 1, "name": "Zoë"}\n{"op": "d", "id": 1}\n'
B_JSON = (
    '{\n'
    '  "op": "c",\n'
    '  "id": 2\n'
    '}\n'
    '{\n'
    '  "op": \n'
    '}\n'
    '{"op": "c", "id": 3}\n'
)
C_JSONL = '{"op": "c", "id": 4}\n'


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture()
def s3_lake(tmp_path: Path, s3_bucket: S3Bucket) -> LakeSettings:
    return LakeSettings.from_env(
        tmp_path / "lake", env={"CDCLAKE_RAW": s3_bucket.uri("raw"), "CDCLAKE_S3_ENDPOINT": s3_bucket.endpoint})


class Bucket:
    """Independent view of the test bucket (plain boto3)."""

    def __init__(self, bucket: S3Bucket) -> None:
        self.name = bucket.name
        self.client = bucket.client()

    def put(self, key: str, text: str) -> None:
        self.client.put_object(Bucket=self.name, Key=key, Body=text.encode("utf-8"))

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.name, Key=key)["Body"].read()

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def delete(self, prefix: str) -> None:
        for key in self.keys(prefix):
            self.client.delete_object(Bucket=self.name, Key=key)


@pytest.fixture()
def bucket(s3_bucket: S3Bucket) -> Bucket:
    return Bucket(s3_bucket)


def land_inbox(settings: LakeSettings, bucket: Bucket) -> pipeline.LandResult:
    return pipeline.land_inbox(settings, source=SOURCE, inbox=f"s3://{bucket.name}/inbox/")


def test_s3_inbox_lands_as_a_batch_with_a_manifest(s3_lake: LakeSettings, bucket: Bucket) -> None:
    bucket.put("inbox/a.jsonl", A_JSONL)
    bucket.put("inbox/b.json", B_JSON)

    result = land_inbox(s3_lake, bucket)

    assert result == pipeline.LandResult(SOURCE, "00000001", True, 6,
                                         f"s3://{bucket.name}/raw/shop/manifests/00000001.json")
    manifest = json.loads(bucket.get("raw/shop/manifests/00000001.json"))
    assert manifest["batch_id"] == "00000001"
    assert manifest["source"] == SOURCE
    assert manifest["message_count"] == 6
    files = manifest["files"]
    assert [f["input"] for f in files] == [f"s3://{bucket.name}/inbox/a.jsonl", f"s3://{bucket.name}/inbox/b.json"]
    assert [f["sha256"] for f in files] == [sha(A_JSONL), sha(B_JSON)]
    assert [f["size"] for f in files] == [len(A_JSONL.encode()), len(B_JSON.encode())]
    assert [f["framing"] for f in files] == ["jsonl", "json"]
    assert [f["messages"] for f in files] == [3, 3]
    assert [f["broken"] for f in files] == [0, 1]
    assert [(f["first_line"], f["last_line"]) for f in files] == [(1, 4), (1, 8)]
    assert [f["raw_object"] for f in files] == [
        "batches/00000001/part-00000.jsonl", "batches/00000001/part-00001.jsonl"]
    for f in files:
        assert f["raw_sha256"] == hashlib.sha256(bucket.get(f"raw/shop/{f['raw_object']}")).hexdigest()
    assert read_manifest(s3_lake, SOURCE, "00000001") == manifest

    assert bucket.keys("raw/shop/") == sorted([
        "raw/shop/claims/00000001",
        "raw/shop/manifests/00000001.json",
        "raw/shop/batches/00000001/part-00000.jsonl",
        "raw/shop/batches/00000001/part-00001.jsonl",
        f"raw/shop/landed/{sha(A_JSONL)}.json",
        f"raw/shop/landed/{sha(B_JSON)}.json",
    ])
    assert json.loads(bucket.get(f"raw/shop/landed/{sha(A_JSONL)}.json")) == {
        "batch_id": "00000001", "input": f"s3://{bucket.name}/inbox/a.jsonl"}
    assert list_batches(s3_lake, SOURCE) == ["00000001"]


def test_gzip_objects_of_a_kafka_connect_s3_sink_land_as_their_text(s3_lake: LakeSettings, bucket: Bucket) -> None:
    # Kafka Connect's S3 sink (JsonFormat, s3.compression.type=gzip) writes one gzip object of JSON lines per
    # partition range, named by topic, partition and first offset.
    prefix = "inbox/topics/dbserver1.inventory.customers/partition=0/dbserver1.inventory.customers+0+"
    first, second = A_JSONL, B_JSON
    packed = gzip.compress(first.encode())
    bucket.client.put_object(Bucket=bucket.name, Key=prefix + "0000000000.json.gz", Body=packed)
    # a stream of two gzip members (a writer that appended) is one text
    body = gzip.compress(second[:20].encode()) + gzip.compress(second[20:].encode())
    bucket.client.put_object(Bucket=bucket.name, Key=prefix + "0000000003.json.gz", Body=body)

    result = land_inbox(s3_lake, bucket)

    assert (result.batch_id, result.message_count) == ("00000001", 6)
    manifest = read_manifest(s3_lake, SOURCE, "00000001")
    assert [(f["framing"], f["messages"], f["broken"]) for f in manifest["files"]] == [("jsonl", 3, 0), ("json", 3, 1)]
    assert [f["sha256"] for f in manifest["files"]] == [
        hashlib.sha256(packed).hexdigest(), hashlib.sha256(body).hexdigest()]
    raw = [json.loads(line) for path in batch_raw_paths(s3_lake, SOURCE, "00000001")
           for line in Path(path).read_text().splitlines()]
    assert [r["value"] for r in raw[:3]] == [line for line in first.splitlines() if line]
    assert [(r["line"], r["byte_offset"]) for r in raw[:3]] == [
        (1, 0), (3, offset_of(first, '{"op": "u"')), (4, offset_of(first, '{"op": "d"'))]
    assert [r["value"] for r in raw] == [r["value"] for r in frame(first) + frame(second)]


def test_zstd_inputs_of_several_frames_land_as_their_text(local_lake: LakeSettings, tmp_path: Path) -> None:
    # Aiven's S3 sink writes zstd (`file.compression.type=zstd`); a writer that appended makes several frames, some
    # without their content size.
    packed = tmp_path / "topic-0-0000000000.json.zst"
    packed.write_bytes(zstandard.ZstdCompressor(write_content_size=False).compress(A_JSONL[:30].encode())
                       + zstandard.ZstdCompressor().compress(A_JSONL[30:].encode()))

    landed = pipeline.land_inputs(local_lake, source=SOURCE, inputs=[str(packed)])

    raw = [json.loads(line) for path in batch_raw_paths(local_lake, SOURCE, landed.batch_id)
           for line in Path(path).read_text(encoding="utf-8").splitlines()]
    assert [(r["value"], r["line"], r["error"]) for r in raw] == [
        (r["value"], r["line"], None) for r in frame(A_JSONL)]


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_a_compressed_input_cut_short_lands_what_it_holds_and_a_broken_message_for_the_rest(
        local_lake: LakeSettings, tmp_path: Path, kind: str) -> None:
    # A writer that died mid-file: the lines before the cut land (as a plain file cut short does), the line the
    # cut falls in is a message that is not JSON, and the rest is a broken message saying what happened.
    # (hashes: text that does not compress to less than zstd's 128 KB block, so the cut leaves whole blocks)
    text = "".join(f'{{"op": "c", "id": {i}, "note": "{hashlib.sha256(str(i).encode()).hexdigest()}"}}\n'
                   for i in range(20000))
    packed = (gzip.compress(text.encode(), mtime=0) if kind == "gzip"
              else zstandard.ZstdCompressor().compress(text.encode()))
    cut = tmp_path / f"part.json.{kind}"
    cut.write_bytes(packed[:len(packed) // 2])

    landed = pipeline.land_inputs(local_lake, source=SOURCE, inputs=[str(cut)])

    raw = [json.loads(line) for path in batch_raw_paths(local_lake, SOURCE, landed.batch_id)
           for line in Path(path).read_text(encoding="utf-8").splitlines()]
    *whole, last, rest = raw
    lines = text.splitlines()
    assert len(whole) > 100
    assert [r["value"] for r in whole] == lines[:len(whole)]
    assert all(r["error"] is None for r in whole)
    assert lines[len(whole)].startswith(last["value"]) and last["value"] != lines[len(whole)]
    assert rest["error"].startswith(f"the {kind} stream is cut short after ")
    assert rest["error"].endswith(": the messages before this point landed; land the whole file again")
    assert rest["line"] == len(whole) + 1
    assert rest["byte_offset"] == sum(len(line) + 1 for line in lines[:len(whole)]) + len(last["value"])
    with pytest.raises(ValueError):
        json.loads(rest["value"])  # a replay holds it again
    assert read_manifest(local_lake, SOURCE, landed.batch_id)["files"][0]["broken"] == 1


def test_a_damaged_gzip_input_lands_its_earlier_members(local_lake: LakeSettings, tmp_path: Path) -> None:
    damaged = tmp_path / "part.json.gz"
    good = gzip.compress(A_JSONL.encode(), mtime=0)
    bad = bytearray(gzip.compress(B_JSON.encode(), mtime=0))
    bad[12:20] = b"\xff" * 8  # inside the deflate data
    damaged.write_bytes(good + bytes(bad) + b"\x00" * 16)

    landed = pipeline.land_inputs(local_lake, source=SOURCE, inputs=[str(damaged)])

    raw = [json.loads(line) for path in batch_raw_paths(local_lake, SOURCE, landed.batch_id)
           for line in Path(path).read_text(encoding="utf-8").splitlines()]
    assert [r["value"] for r in raw[:3]] == [r["value"] for r in frame(A_JSONL)]
    assert raw[-1]["error"].startswith(f"the gzip stream is damaged after {len(A_JSONL.encode())} decompressed bytes (")


@pytest.mark.parametrize("between, after", [(b"", b"\x00" * 512), (b"\x00" * 64, b"\n"), (b"\n", b"")])
def test_padding_between_and_after_compressed_members_is_not_data(local_lake: LakeSettings, tmp_path: Path,
                                                                  between: bytes, after: bytes) -> None:
    padded = tmp_path / "part.json.gz"
    padded.write_bytes(gzip.compress(A_JSONL.encode(), mtime=0) + between + gzip.compress(b'{"id": 9}\n', mtime=0)
                       + after)

    landed = pipeline.land_inputs(local_lake, source=SOURCE, inputs=[str(padded)])

    assert (landed.message_count, read_manifest(local_lake, SOURCE, landed.batch_id)["files"][0]["broken"]) == (4, 0)


def test_a_zstd_input_starting_with_a_skippable_frame_is_read(local_lake: LakeSettings, tmp_path: Path) -> None:
    pzstd = tmp_path / "part.json.zst"  # pzstd starts its output with a skippable frame
    pzstd.write_bytes(bytes.fromhex("502a4d18") + (4).to_bytes(4, "little") + b"\x00\x00\x10\x00"
                      + zstandard.ZstdCompressor().compress(A_JSONL.encode()))

    landed = pipeline.land_inputs(local_lake, source=SOURCE, inputs=[str(pzstd)])

    raw = [json.loads(line) for path in batch_raw_paths(local_lake, SOURCE, landed.batch_id)
           for line in Path(path).read_text(encoding="utf-8").splitlines()]
    assert [(r["value"], r["error"]) for r in raw] == [(r["value"], None) for r in frame(A_JSONL)]


def test_a_utf16_input_cut_mid_character_lands_its_whole_messages(local_lake: LakeSettings, tmp_path: Path) -> None:
    text = "".join(f'{{"id": {i}}}\n' for i in range(3))
    lone = "\ud83d"  # half of an emoji's surrogate pair, as a careless UTF-16 writer may leave it
    odd = tmp_path / "cut.json"
    odd.write_bytes((text + f'{{"name": "{lone}"}}\n{{"id": 4}}\n').encode("utf-16", "surrogatepass")[:-1])

    landed = pipeline.land_inputs(local_lake, source=SOURCE, inputs=[str(odd)])

    raw = [json.loads(line) for path in batch_raw_paths(local_lake, SOURCE, landed.batch_id)
           for line in Path(path).read_text(encoding="utf-8").splitlines()]
    assert [r["value"] for r in raw[:3]] == text.splitlines()
    assert [r["error"] is None for r in raw] == [True, True, True, False, True, False]
    assert raw[3]["error"].startswith("not UTF-8 text: lone surrogate U+D83D")
    assert raw[4]["value"] == '{"id": 4}'  # (the half character cut off is its line feed's)
    assert raw[5]["error"].startswith("the UTF-16 text ends in half a character: ")


def test_bytes_that_are_not_utf8_anywhere_in_a_kcat_envelope_make_only_that_message_broken(
        local_lake: LakeSettings, tmp_path: Path) -> None:
    dump = tmp_path / "kcat.jsonl"
    dump.write_bytes(b'{"topic": "t", "offset": "1\xff", "payload": "{}"}\n'
                     b'{"topic": "t", "offset": 2, "key": {"id": "\xe9"}, "payload": "{}"}\n'
                     b'{"topic": "t", "offset": 3, "headers": {"h": {"x": "\xe9"}}, "payload": "{}"}\n'
                     b'{"topic": "t", "offset": 4, "key": {"id": 4}, "payload": "{}"}\n')

    landed = pipeline.land_inputs(local_lake, source=SOURCE, inputs=[str(dump)])

    raw = [json.loads(line) for path in batch_raw_paths(local_lake, SOURCE, landed.batch_id)
           for line in Path(path).read_text(encoding="utf-8").splitlines()]
    assert [r["error"].split(" (")[0] if r["error"] else None for r in raw] == [
        "not UTF-8 text: byte 0xFF at character 1 of the message offset",
        "not UTF-8 text: byte 0xE9 at character 8 of the message key",
        "not UTF-8 text: byte 0xE9 at character 17 of the message headers", None]
    assert (raw[1]["key"], raw[2]["headers"], raw[3]["key"]) == (
        '{"id": "\\xE9"}', {"h": '{"x": "\\xE9"}'}, '{"id": 4}')


def test_a_message_after_a_broken_document_that_starts_with_a_byte_order_mark_is_read() -> None:
    records = frame('{\n "a": \n\ufeff{"id": 2}\n{"id": 3}\n')

    assert [(r["value"], r["error"] is None) for r in records] == [
        ('{\n "a":', False), ('{"id": 2}', True), ('{"id": 3}', True)]


def test_raw_records_downloaded_locally_hold_every_message(s3_lake: LakeSettings, bucket: Bucket) -> None:
    bucket.put("inbox/a.jsonl", A_JSONL)
    bucket.put("inbox/b.json", B_JSON)
    land_inbox(s3_lake, bucket)

    paths = batch_raw_paths(s3_lake, SOURCE, "00000001")

    assert len(paths) == 2
    assert all(Path(p).is_file() and not p.startswith("s3:") for p in paths)
    a = [json.loads(line) for line in Path(paths[0]).read_text(encoding="utf-8").splitlines()]
    b = [json.loads(line) for line in Path(paths[1]).read_text(encoding="utf-8").splitlines()]
    assert [r["value"] for r in a] == ['{"op": "c", "id": 1}', '{"op": "u", "id": 1, "name": "Zoë"}',
                                       '{"op": "d", "id": 1}']
    assert [r["line"] for r in a] == [1, 3, 4]
    assert [r["byte_offset"] for r in a] == [0, offset_of(A_JSONL, '{"op": "u"'), offset_of(A_JSONL, '{"op": "d"')]
    assert [(r["input"], r["file_index"]) for r in a] == [(f"s3://{bucket.name}/inbox/a.jsonl", 0)] * 3
    assert [r["line"] for r in b] == [1, 5, 8]
    assert [r["error"] is None for r in b] == [True, False, True]
    assert b[1]["value"] == '{\n  "op": \n}'
    assert {r["file_index"] for r in b} == {1}
    # the local copies are byte-for-byte the raw objects
    assert Path(paths[1]).read_bytes() == bucket.get("raw/shop/batches/00000001/part-00001.jsonl")


def test_landing_the_same_inbox_twice_creates_no_second_batch(s3_lake: LakeSettings, bucket: Bucket) -> None:
    bucket.put("inbox/a.jsonl", A_JSONL)
    first = land_inbox(s3_lake, bucket)
    before = bucket.keys("raw/")

    again = land_inbox(s3_lake, bucket)

    assert first.batch_id == "00000001"
    assert again == pipeline.LandResult(SOURCE, None, False)
    assert bucket.keys("raw/") == before
    assert list_batches(s3_lake, SOURCE) == ["00000001"]


def test_a_new_inbox_file_lands_as_the_next_batch_alone(s3_lake: LakeSettings, bucket: Bucket) -> None:
    bucket.put("inbox/a.jsonl", A_JSONL)
    bucket.put("inbox/b.json", B_JSON)
    assert land_inbox(s3_lake, bucket).batch_id == "00000001"

    bucket.put("inbox/c.jsonl", C_JSONL)
    second = land_inbox(s3_lake, bucket)

    assert (second.batch_id, second.created, second.message_count) == ("00000002", True, 1)
    manifest = json.loads(bucket.get("raw/shop/manifests/00000002.json"))
    assert [(f["input"], f["sha256"]) for f in manifest["files"]] == [
        (f"s3://{bucket.name}/inbox/c.jsonl", sha(C_JSONL))]
    assert list_batches(s3_lake, SOURCE) == ["00000001", "00000002"]

    bucket.put("inbox/d.jsonl", '{"op": "c", "id": 5}\n{"op": "c", "id": 6}\n')
    assert land_inbox(s3_lake, bucket).batch_id == "00000003"
    assert list_batches(s3_lake, SOURCE) == ["00000001", "00000002", "00000003"]


def test_a_copy_of_a_landed_file_under_another_name_is_not_landed_again(
    s3_lake: LakeSettings, bucket: Bucket
) -> None:
    bucket.put("inbox/a.jsonl", A_JSONL)
    land_inbox(s3_lake, bucket)
    bucket.put("inbox/a-retry.jsonl", A_JSONL)

    assert land_inbox(s3_lake, bucket).batch_id is None
    assert list_batches(s3_lake, SOURCE) == ["00000001"]


def test_local_inputs_land_into_the_s3_raw_zone(s3_lake: LakeSettings, bucket: Bucket, tmp_path: Path) -> None:
    local = tmp_path / "events.jsonl"
    local.write_text(C_JSONL, encoding="utf-8")

    first = pipeline.land_inputs(s3_lake, source=SOURCE, inputs=[str(local)])
    again = pipeline.land_inputs(s3_lake, source=SOURCE, inputs=[str(local)])

    assert (first.batch_id, first.created, first.message_count) == ("00000001", True, 1)
    assert first.manifest == f"s3://{bucket.name}/raw/shop/manifests/00000001.json"
    # landing the same input again returns the batch that holds it
    assert (again.batch_id, again.created, again.message_count) == ("00000001", False, 1)
    manifest = json.loads(bucket.get("raw/shop/manifests/00000001.json"))
    assert [(f["input"], f["sha256"]) for f in manifest["files"]] == [(str(local.resolve()), sha(C_JSONL))]
    assert list_batches(s3_lake, SOURCE) == ["00000001"]


def test_a_single_s3_object_is_an_input(s3_lake: LakeSettings, bucket: Bucket) -> None:
    bucket.put("inbox/a.jsonl", A_JSONL)
    bucket.put("inbox/a.jsonl.bak", C_JSONL)  # shares the object's name as a prefix; must not come along

    result = pipeline.land_inputs(s3_lake, source=SOURCE, inputs=[f"s3://{bucket.name}/inbox/a.jsonl"])

    assert (result.batch_id, result.message_count) == ("00000001", 3)
    manifest = json.loads(bucket.get("raw/shop/manifests/00000001.json"))
    assert [f["input"] for f in manifest["files"]] == [f"s3://{bucket.name}/inbox/a.jsonl"]


def test_an_empty_or_missing_s3_inbox_lands_nothing(s3_lake: LakeSettings, bucket: Bucket) -> None:
    assert land_inbox(s3_lake, bucket) == pipeline.LandResult(SOURCE, None, False)
    bucket.put("inbox/", "")  # a folder marker, as a console creates it
    assert land_inbox(s3_lake, bucket) == pipeline.LandResult(SOURCE, None, False)
    assert list_batches(s3_lake, SOURCE) == []
    assert bucket.keys("raw/") == []


def test_an_s3_input_that_cannot_be_read_is_an_input_error(s3_lake: LakeSettings, bucket: Bucket) -> None:
    with pytest.raises(InputError, match=f"s3://{bucket.name}/inbox/nothing-here"):
        resolve_inputs([f"s3://{bucket.name}/inbox/nothing-here/"], s3_endpoint=s3_lake.s3_endpoint)
    with pytest.raises(InputError, match="s3://no-such-bucket-cdclake/inbox"):
        resolve_inputs(["s3://no-such-bucket-cdclake/inbox/"], s3_endpoint=s3_lake.s3_endpoint)


def test_lander_that_died_before_its_landed_markers_does_not_land_twice(
    s3_lake: LakeSettings, bucket: Bucket
) -> None:
    bucket.put("inbox/a.jsonl", A_JSONL)
    bucket.put("inbox/b.json", B_JSON)
    assert land_inbox(s3_lake, bucket).batch_id == "00000001"
    # The manifest (the commit point) was written, the landed markers were not.
    bucket.delete("raw/shop/landed/")
    assert bucket.keys("raw/shop/landed/") == []

    again = land_inbox(s3_lake, bucket)

    assert again == pipeline.LandResult(SOURCE, None, False)
    assert list_batches(s3_lake, SOURCE) == ["00000001"]
    assert bucket.keys("raw/shop/manifests/") == ["raw/shop/manifests/00000001.json"]
    assert bucket.keys("raw/shop/landed/") == sorted(
        [f"raw/shop/landed/{sha(A_JSONL)}.json", f"raw/shop/landed/{sha(B_JSON)}.json"])
    # and a genuinely new file still lands as the next batch
    bucket.put("inbox/c.jsonl", C_JSONL)
    assert land_inbox(s3_lake, bucket).batch_id == "00000002"


def test_lander_that_died_before_its_manifest_leaves_no_batch(s3_lake: LakeSettings, bucket: Bucket) -> None:
    bucket.put("inbox/a.jsonl", A_JSONL)
    assert land_inbox(s3_lake, bucket).batch_id == "00000001"
    # Batch 1 was claimed and its raw records written, but the lander died before the manifest.
    bucket.delete("raw/shop/manifests/")
    bucket.delete("raw/shop/landed/")
    assert list_batches(s3_lake, SOURCE) == []

    again = land_inbox(s3_lake, bucket)

    # The input lands again under a fresh id; the claimed id is never reused.
    assert (again.batch_id, again.created) == ("00000002", True)
    assert list_batches(s3_lake, SOURCE) == ["00000002"]
