"""Property tests of the apply core: random Debezium change streams, cut into random micro-batches, delivered in
random order with duplicates and replays, applied with real Spark into real Iceberg tables, compared with the
plain-Python reference applier (:mod:`tests.support.cdc_model`).

The streams mix snapshots (re-snapshots mid-stream, with both Debezium end markers), inserts, updates with the
unchanged-TOAST placeholder, deletes with Kafka tombstones, deletes and re-inserts of the same key, primary-key
changes, truncates and a column added mid-stream. The same streams without snapshots are also sent as canal flat
messages (the rows of one statement in one message, canal's partial image for the TOAST updates, a primary-key
change as one UPDATE, a TRUNCATE statement); the message is then the unit of batching and redelivery. When
batches arrive in source order the reference must also equal the simulated table's true content, which checks the
reference itself.

A failing example is written to ``tests/fixtures/apply_regressions/last-failure.json`` each time it fails;
Hypothesis runs the shrunk (minimal) example last, so that file ends up holding it. Keep it by renaming it: every
JSON file in that directory is replayed by :func:`test_regression_fixtures`.

``CDCLAKE_PROPERTY_EXAMPLES`` sets the number of examples (default 8 per mode, sized for CI; each example runs
several Spark micro-batches).
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.cdc_model import (EXTRA, PLACEHOLDER, Event, Reference, canal_messages, encode,
                                     encode_canal_batch, row_images, simulate)

# In the extended tier (16 minutes of a CI worker; the apply's semantics also have unit and e2e oracle tests):
# `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended

REGRESSIONS = Path(__file__).resolve().parents[1] / "fixtures" / "apply_regressions"
EXAMPLES = int(os.environ.get("CDCLAKE_PROPERTY_EXAMPLES", "8"))
_names = itertools.count(1)

keys = st.integers(min_value=1, max_value=5)
_changes = [
    st.tuples(st.just("upsert"), keys),
    st.tuples(st.just("update"), keys, st.booleans()),
    st.tuples(st.just("delete"), keys),
    st.tuples(st.just("rekey"), keys, keys),
    st.tuples(st.just("truncate")),
    st.tuples(st.just("add_column")),
]
actions = st.lists(st.one_of(*_changes, st.tuples(st.just("snapshot"), st.integers(min_value=0, max_value=1))),
                   min_size=1, max_size=24)
canal_actions = st.lists(st.one_of(*_changes), min_size=1, max_size=24)
"""canal's flat messages have no snapshot reads (its full sync is a separate tool)."""
T = TypeVar("T")


def _deliveries(data: st.DataObject, events: list[T]) -> tuple[list[list[T]], bool]:
    """Cut the events (or messages) into 1-4 batches, add redelivered duplicates, maybe shuffle, maybe replay one at
    the end."""
    n = len(events)
    count = data.draw(st.integers(min_value=1, max_value=min(4, n)), label="batches")
    cuts = sorted(data.draw(st.sets(st.integers(min_value=1, max_value=n - 1), min_size=count - 1,
                                    max_size=count - 1), label="cuts")) if count > 1 else []
    bounds = [0, *cuts, n]
    batches = [list(events[a:b]) for a, b in zip(bounds, bounds[1:])]
    for index in data.draw(st.lists(st.integers(min_value=0, max_value=n - 1), max_size=3), label="duplicates"):
        home = next(i for i, (a, b) in enumerate(zip(bounds, bounds[1:])) if a <= index < b)
        target = data.draw(st.integers(min_value=home, max_value=len(batches) - 1), label="duplicate into")
        batches[target].append(events[index])
    in_order = data.draw(st.booleans(), label="in order")
    order = list(range(len(batches))) if in_order else data.draw(st.permutations(range(len(batches))),
                                                                label="order")
    delivered = [batches[i] for i in order]
    replay = data.draw(st.none() | st.integers(min_value=0, max_value=len(delivered) - 1), label="replay")
    if replay is not None:
        delivered.append(delivered[replay])
    return delivered, in_order or order == sorted(order)


def _lake_rows(spark: Any, tid: str, soft: bool) -> dict[int, Any]:
    from cdclake.identity import spark_table_name

    df = spark.table(spark_table_name(tid))
    out: dict[int, Any] = {}
    for row in df.collect():
        d = row.asDict()
        values = {"name": d["name"], "qty": d["qty"], "note": d["note"], EXTRA: d.get(EXTRA)}
        out[d["id"]] = (values, bool(d.get("_cdc_is_deleted"))) if soft else values
    return out


def run_scenario(spark: Any, lake: Any, tmp: Path, delivered: list[list[Event]], *, soft: bool,
                 truth: dict[int, dict[str, Any]] | None, history: bool | None = None,
                 fmt: str = "debezium") -> tuple[str, list[Any]]:
    """Deliver batches through land -> normalize -> apply; compare with the reference after every batch.

    ``history``: keep an SCD2 history (None: every other scenario does). ``fmt``: ``debezium`` (``kcat -J``
    lines) or ``canal`` (flat messages; a batch's events are whole messages, see ``canal_messages``). Returns the
    table and each batch's apply counts."""
    from cdclake import pipeline
    from cdclake.apply import ApplyOptions

    n = next(_names)
    schema, source = f"prop{n}_{'soft' if soft else 'hard'}", f"prop{n}"
    tid = f"{schema}.items"
    ref = Reference(soft=soft)
    seq_of: dict[str, int] = {}
    counts = []
    # Every other scenario keeps an SCD2 history (compared below); the others take the bulk-load path of a first
    # batch into an empty table, which a history turns off.
    history = n % 2 == 0 if history is None else history
    # Every other history scenario turns it on halfway: the table's rows then become its open versions.
    history_from = len(delivered) // 2 if n % 4 == 2 else 0
    # What each change found at the source (a canal UPDATE's `old`, a DELETE's row), from the stream in source order.
    found = row_images(sorted({e.lsn: e for b in delivered for e in b}.values(), key=lambda e: e.lsn))
    for number, batch in enumerate(delivered):
        options = ApplyOptions(delete_mode="soft" if soft else "hard", history=history and number >= history_from)
        if history and history_from and number == history_from:
            ref.start_history()
        if fmt == "canal":
            content = encode_canal_batch(batch, database=schema, table="items", found=found)
        else:
            lines: list[str] = []
            for e in batch:
                lines += encode(e, schema=schema, table="items", offset=len(lines))
            content = "\n".join(lines) + "\n"
        seq = seq_of.setdefault(content, len(seq_of) + 1)
        ref.apply_batch(seq, batch)
        path = tmp / f"{source}-{number}.jsonl"
        path.write_text(content)
        landed = pipeline.land_inputs(lake, source=source, inputs=[str(path)],
                                      framing="jsonl" if fmt == "canal" else "kcat")
        assert landed.batch_id is not None
        normalized = pipeline.normalize_batch(spark, lake, source=source, batch_id=landed.batch_id, fmt=fmt)
        assert normalized.quarantined == 0, normalized
        applied = pipeline.apply_batch(spark, lake, source=source, batch_id=landed.batch_id, default=options)
        counts.append(applied.tables.get(tid))
        if tid in applied.tables:
            lake_rows = _lake_rows(spark, tid, soft)
            live = sum(1 for v in lake_rows.values() if not (soft and v[1]))
            assert applied.tables[tid].rows_after == live, (applied.tables[tid], live)
    expected = ref.all_rows() if soft else ref.live()
    actual = _lake_rows(spark, tid, soft) if expected or _table_exists(spark, tid) else {}
    assert actual == expected
    if history:
        expected_versions = {k: [(v.values, v.closed) for v in vs] for k, vs in ref.versions.items()}
        assert _lake_versions(spark, tid) == expected_versions
    assert _lake_changelog(spark, tid) == ref.changelog
    if truth is not None:
        assert ref.live() == truth, "the reference applier disagrees with the simulated source"
    return tid, counts


def _lake_changelog(spark: Any, tid: str) -> dict[int, list[str]]:
    """Per key, the changelog's actions in position order."""
    from cdclake.apply import changelog_table_id
    from cdclake.identity import spark_table_name

    if not _table_exists(spark, changelog_table_id(tid)):
        return {}
    out: dict[int, list[str]] = {}
    for r in sorted(spark.table(spark_table_name(changelog_table_id(tid))).select(
            "id", "_cdc_position", "_cdc_action").collect(), key=lambda r: (r["id"], r["_cdc_position"])):
        out.setdefault(r["id"], []).append(r["_cdc_action"])
    return out


def _lake_versions(spark: Any, tid: str) -> dict[int, list[tuple[dict[str, Any], str | None]]]:
    """The SCD type 2 history per key, in version order: (values, None | "superseded" | "ended")."""
    from cdclake.apply import history_table_id
    from cdclake.identity import spark_table_name

    if not _table_exists(spark, history_table_id(tid)):
        return {}
    rows = sorted(spark.table(spark_table_name(history_table_id(tid))).collect(),
                  key=lambda r: (r["id"], r["_cdc_valid_from"]))
    out: dict[int, list[tuple[dict[str, Any], str | None]]] = {}
    for i, r in enumerate(rows):
        following = rows[i + 1] if i + 1 < len(rows) and rows[i + 1]["id"] == r["id"] else None
        if r["_cdc_valid_to"] is None:
            closed = None
        else:
            closed = "superseded" if following is not None and following["_cdc_valid_from"] == r["_cdc_valid_to"] \
                else "ended"
        values = {"name": r["name"], "qty": r["qty"], "note": r["note"], EXTRA: r.asDict().get(EXTRA)}
        out.setdefault(r["id"], []).append((values, closed))
    assert all(r["_cdc_current"] == (r["_cdc_valid_to"] is None) for r in rows)
    # Every version has its source times, closed ones (by a change, a delete or a cut) their end time too.
    assert all(r["_cdc_valid_from_ts"] is not None for r in rows)
    assert all((r["_cdc_valid_to"] is None) == (r["_cdc_valid_to_ts"] is None) for r in rows)
    assert all(r["_cdc_valid_to_ts"] is None or r["_cdc_valid_from_ts"] <= r["_cdc_valid_to_ts"] for r in rows)
    return out


def _table_exists(spark: Any, tid: str) -> bool:
    from cdclake.catalog import table_exists

    return table_exists(spark, tid)


def _record_failure(delivered: list[list[Event]], soft: bool, truth_checked: bool, fmt: str) -> None:
    REGRESSIONS.mkdir(parents=True, exist_ok=True)
    (REGRESSIONS / "last-failure.json").write_text(json.dumps({
        "soft": soft, "in_order": truth_checked, "fmt": fmt,
        "batches": [[e.to_json() for e in b] for b in delivered]}, indent=1))


def _check(spark: Any, lake: Any, tmp: Path, data: st.DataObject, soft: bool, fmt: str = "debezium") -> None:
    events, truth = simulate(data.draw(canal_actions if fmt == "canal" else actions, label="actions"))
    if not events:
        return
    # canal's unit of delivery is a message, which may hold several rows; a Debezium event is one message.
    units = canal_messages(events) if fmt == "canal" else [[e] for e in events]
    batches, in_order = _deliveries(data, units)
    delivered = [[e for unit in batch for e in unit] for batch in batches]
    try:
        run_scenario(spark, lake, tmp, delivered, soft=soft, truth=truth if in_order else None, fmt=fmt)
    except AssertionError:
        _record_failure(delivered, soft, in_order, fmt)
        raise


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
@given(data=st.data())
def test_hard_deletes_match_the_reference(spark, session_lake, tmp_path_factory, data) -> None:
    _check(spark, session_lake, tmp_path_factory.mktemp("prop"), data, soft=False)


@settings(max_examples=max(2, EXAMPLES // 2), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_soft_deletes_match_the_reference(spark, session_lake, tmp_path_factory, data) -> None:
    _check(spark, session_lake, tmp_path_factory.mktemp("prop"), data, soft=True)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_canal_messages_match_the_reference(spark, session_lake, tmp_path_factory, data) -> None:
    """The same simulated source behind canal: multi-row statements, partial update images (NOBLOB), TRUNCATE as
    DDL, a column that appears in `mysqlType`, the same random batches, duplicates and replays."""
    _check(spark, session_lake, tmp_path_factory.mktemp("prop"), data, soft=False, fmt="canal")


@pytest.mark.parametrize("fixture", sorted(p.name for p in REGRESSIONS.glob("*.json")))
def test_regression_fixtures(spark, session_lake, tmp_path, fixture: str) -> None:
    spec = json.loads((REGRESSIONS / fixture).read_text())
    delivered = [[Event.from_json(e) for e in b] for b in spec["batches"]]
    truth = spec.get("truth")
    run_scenario(spark, session_lake, tmp_path, delivered, soft=spec["soft"],
                 truth={int(k): v for k, v in truth.items()} if truth is not None else None,
                 fmt=spec.get("fmt", "debezium"))


@pytest.mark.parametrize("updated", [False, True], ids=["distinct-keys", "a-key-changed-twice"])
def test_a_first_batch_into_an_empty_table_keeps_the_newest_change_of_each_key(spark, session_lake, tmp_path,
                                                                              updated: bool) -> None:
    """The bulk load of a first batch (no history): a snapshot's keys are distinct and every row is appended; a
    batch that also changes a key again appends only that key's newest change."""
    batch = [Event(1000 + i, "r", i, {"name": f"n{i}", "qty": i, "note": None}, snapshot="true") for i in range(1, 6)]
    if updated:
        batch += [Event(1010, "u", 3, {"name": "n3b", "qty": 30, "note": "second"}),
                  Event(1011, "u", 3, {"name": "n3c", "qty": 31, "note": "third"}),
                  Event(1012, "c", 9, {"name": "n9", "qty": 9, "note": None})]
    run_scenario(spark, session_lake, tmp_path, [batch], soft=False, truth=None, history=False)


@pytest.mark.parametrize("soft", [False, True], ids=["hard", "soft"])
@pytest.mark.parametrize("history", [False, True], ids=["no-history", "history"])
def test_changes_delivered_again_are_applied_once(spark, session_lake, tmp_path, soft: bool, history: bool) -> None:
    """At-least-once delivery: a connector restarted after the first batch sends its last changes again (the same
    LSNs, ops and values) in the second, and one of them twice. They are stale: the table, the changelog and the
    counts show each change once (written out by hand, not by the reference)."""
    def row(n: int) -> dict[str, Any]:
        return {"name": f"n{n}", "qty": n, "note": f"note-{n}"}

    first = [Event(1008, "c", 1, row(1)), Event(1016, "c", 2, row(2)), Event(1024, "u", 1, row(11)),
             Event(1032, "d", 2)]
    second = [Event(1024, "u", 1, row(11)), Event(1032, "d", 2), Event(1040, "c", 3, row(3)),
              Event(1040, "c", 3, row(3)), Event(1024, "u", 1, row(11))]
    tid, counts = run_scenario(spark, session_lake, tmp_path, [first, second], soft=soft, truth=None,
                               history=history)
    assert _lake_changelog(spark, tid) == {1: ["insert", "update"], 2: ["insert", "delete"], 3: ["insert"]}
    again = counts[1]
    assert (again.inserted, again.updated, again.deleted) == (1, 0, 0), again
    live = {k: v for k, v in _lake_rows(spark, tid, soft).items() if not (soft and v[1])}
    assert sorted(live) == [1, 3]


def test_a_toast_placeholder_on_a_key_the_lake_never_had_is_stored_null_and_counted(spark, session_lake,
                                                                                    tmp_path) -> None:
    """An update whose unchanged TOAST column's value the lake cannot know (its row is older than the lake, e.g.
    from before the snapshot): the column is null, and the counts say how many rows that happened to."""
    def row(n: int, note: str | None = None) -> dict[str, Any]:
        return {"name": f"n{n}", "qty": n, "note": note or f"note-{n}"}

    first = [Event(1008, "c", 1, row(1)), Event(1016, "u", 2, row(2, PLACEHOLDER), toast=True)]
    second = [Event(1024, "u", 1, row(11, PLACEHOLDER), toast=True),
              Event(1032, "u", 3, row(3, PLACEHOLDER), toast=True)]
    tid, counts = run_scenario(spark, session_lake, tmp_path, [first, second], soft=False, truth=None)
    assert [(c.inserted, c.updated, c.unknown_values) for c in counts] == [(2, 0, 1), (1, 1, 1)]
    assert {k: v["note"] for k, v in _lake_rows(spark, tid, False).items()} == {1: "note-1", 2: None, 3: None}
