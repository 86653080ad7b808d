"""The detail a quarantine reason gives for a message that is not JSON: where Python's parser stops, in characters
of the message, and whether the text ends there (a message cut short)."""

from __future__ import annotations

import pytest

from cdclake.quarantine import json_error


@pytest.mark.parametrize(("text", "detail"), [
    ('{"id": 1, "name": "a', "unterminated string starting at character 19 of 20 (the text ends there: cut short?)"),
    ('{"id": 1', "expecting ',' delimiter at character 9 of 8 (the text ends there: cut short?)"),
    ('{"id": 1,}', "expecting property name enclosed in double quotes at character 10 of 10"),
    ('{"id" 1}', "expecting ':' delimiter at character 7 of 8"),
    ('{"id": 1}}', "extra data at character 10 of 10"),
    ("Struct{id=1}", "expecting value at character 1 of 12"),
])
def test_where_a_text_stops_being_json(text: str, detail: str) -> None:
    assert json_error(text) == detail


def test_a_text_python_reads_has_no_detail() -> None:
    # Spark's parser rejects NaN where Python's reads it: the reason then stays without a detail.
    assert json_error('{"x": NaN}') is None
    assert json_error('{"id": 1}') is None
