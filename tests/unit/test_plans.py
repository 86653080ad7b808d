"""Keys of the expression plans a process reuses across batches (:mod:`cdclake.plans`): two values get one key only
when plans built from them are the same plan."""

from __future__ import annotations

import pytest

from cdclake import plans
from cdclake.formats import connect, sqltypes
from cdclake.normalize import TableTyping


def _scaled(scale: int):
    return lambda c: (c, scale)


def test_decoders_with_equal_captured_values_share_a_key_and_others_do_not():
    assert plans.fingerprint(_scaled(2)) == plans.fingerprint(_scaled(2))
    assert plans.fingerprint(_scaled(2)) != plans.fingerprint(_scaled(3))
    assert plans.fingerprint(_scaled(1)) != plans.fingerprint(lambda c: (c, 1))  # other code
    assert plans.fingerprint(True) != plans.fingerprint(1)  # equal in Python, not in a plan


@pytest.mark.parametrize("first, second, same", [
    ("decimal(10,2)", "decimal(10,2)", True),
    ("decimal(10,2)", "decimal(10,3)", False),
    ("int", "bigint", False),
    ("datetime", "timestamp", False),
    ("varchar(20)", "varchar(30)", True),  # both text: one decoder
])
def test_sql_typed_columns_built_twice_have_one_key(first, second, same):
    a, b = sqltypes.column_type("v", first), sqltypes.column_type("v", second)
    assert (plans.fingerprint(a) == plans.fingerprint(b)) is same


def test_connect_typed_tables_built_twice_have_one_key():
    def typing(scale: int) -> TableTyping:
        return TableTyping(columns=(
            connect.column_type({"field": "id", "type": "int32", "optional": False}),
            connect.column_type({"field": "amt", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                                 "parameters": {"scale": str(scale)}}),
        ), key=("id",))

    assert plans.fingerprint(typing(2)) == plans.fingerprint(typing(2))
    assert plans.fingerprint(typing(2)) != plans.fingerprint(typing(4))


def test_a_value_compared_by_identity_is_not_keyed_and_its_plan_is_built_each_time():
    marker = object()
    assert plans.plan_key("records", lambda c: (c, marker)) is None
    built = []

    def build() -> plans.ColumnPlan:
        built.append(1)
        return plans.ColumnPlan(())

    plans.cached_plan(None, build)
    plans.cached_plan(None, build)
    assert len(built) == 2


def test_the_cache_builds_once_per_key_and_keeps_the_newest_used(monkeypatch):
    monkeypatch.setattr(plans, "_PLANS", type(plans._PLANS)())
    monkeypatch.setattr(plans, "MAX_PLANS", 2)
    built: list[str] = []

    def build(name: str):
        return lambda: built.append(name) or plans.ColumnPlan(())

    for name in ("a", "b", "a", "c", "a", "b"):
        plans.cached_plan((name,), build(name))
    # "b" was the least recently used when "c" came in; "a" stayed.
    assert built == ["a", "b", "c", "b"]
