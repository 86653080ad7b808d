"""`cdclake quarantine list` and `replay`, driven as subprocesses: a keyless table is held, then released."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CLI = [str(Path(sys.executable).parent / "cdclake")]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600)


def lines(result: subprocess.CompletedProcess[str]) -> list[dict]:
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_keyless_messages_are_held_then_replayed_with_a_key(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    update = FIXTURES / "drs" / "gauss_update.json"
    mongo = FIXTURES / "drs" / "mongo_insert.json"
    (applied,) = lines(cli("apply", "--format", "drs", "--input", str(update), str(mongo), "--lake", lake))
    assert applied["quarantined"] == 1 and list(applied["tables"]) == ["ljx.ljx"]

    (held,) = lines(cli("quarantine", "list", "--lake", lake))
    assert held["table_id"] == "schema01.table01" and held["format"] == "drs" and held["batch_id"] == "00000001"
    assert "has no primary key" in held["reason"] and "--key schema01.table01=" in held["reason"]
    assert held["input_file"].endswith("gauss_update.json") and held["line"] == 1
    assert json.loads(held["value"]) == json.loads(update.read_text(encoding="utf-8"))
    assert lines(cli("quarantine", "list", "--lake", lake, "--reason", "no such reason")) == []

    # Replayed without a key, it fails again: held under the replay's batch, at the place it was first landed.
    (again,) = lines(cli("quarantine", "replay", "--lake", lake, "--reason", "primary key"))
    assert (again["replayed"], again["batches"][0]["quarantined"]) == (1, 1)
    (held_again,) = lines(cli("quarantine", "list", "--lake", lake))
    where = ("input_file", "line", "byte_offset", "kafka_offset", "value", "reason")
    assert held_again["batch_id"] == "00000002"
    assert {k: held_again[k] for k in where} == {k: held[k] for k in where}

    # The first input applied again runs batch 1 again: the message it holds back was replayed (and is held by
    # the replay's batch), so it is not quarantined a second time.
    (rerun,) = lines(cli("apply", "--format", "drs", "--input", str(update), str(mongo), "--lake", lake))
    assert (rerun["batch_id"], rerun["new_batch"], rerun["quarantined"]) == ("00000001", False, 0)
    assert rerun["skipped"] == {"replayed from the quarantine by a later batch": 1}, rerun
    assert lines(cli("quarantine", "list", "--lake", lake)) == [held_again]

    (replayed,) = lines(cli("quarantine", "replay", "--lake", lake, "--reason", "primary key",
                            "--key", "schema01.table01=smallint_column"))
    assert replayed["replayed"] == 1
    (batch,) = replayed["batches"]
    # The same messages from the same place: the replay lands nothing new and runs its batch again, with the key.
    assert (batch["batch_id"], batch["quarantined"]) == ("00000002", 0)
    # Counted as apply counts them (``rows``: the table's live rows after the batch).
    assert batch["tables"]["schema01.table01"] == {"inserted": 1, "updated": 0, "deleted": 0, "truncated": 0,
                                                   "skipped_stale": 0, "rows": 1}

    assert lines(cli("quarantine", "list", "--lake", lake)) == []
    (row,) = lines(cli("dump", "--lake", lake, "--table", "schema01.table01"))
    assert (row["smallint_column"], row["boolean_column"], row["timestamp_column"]) == (
        12, False, "2021-12-16T12:31:49.344365")
    assert sorted(lines(cli("tables", "--lake", lake))[0]) == ["ljx.ljx", "schema01.table01"]


def test_a_batch_read_as_the_wrong_format_says_so_beside_its_summary(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    debezium = FIXTURES / "debezium" / "pg_create.json"
    applied = cli("apply", "--format", "canal", "--input", str(debezium), "--lake", lake)
    assert applied.returncode == 0, applied.stderr  # quarantine is where bad input goes, not an error
    summary = json.loads(applied.stdout)
    assert (summary["messages"], summary["quarantined"], summary["tables"]) == (1, 1, {})
    assert (f"cdclake: warning: every message of batch 00000001 was quarantined (is --format canal right? "
            f"`cdclake quarantine list --lake {lake} --batch 00000001` shows why)") in applied.stderr
    (held,) = lines(cli("quarantine", "list", "--lake", lake, "--batch", "1"))
    assert "debezium" in held["reason"], held["reason"]


def test_a_message_that_is_not_utf8_is_held_with_where_and_the_rest_applies(tmp_path: Path) -> None:
    # A producer that wrote one message in Latin-1: that message is held, saying which byte; the others apply.
    # A replay cannot recover the byte, so it holds the message again rather than apply a changed value.
    lake = str(tmp_path / "lake")
    stream = tmp_path / "latin1.jsonl"
    stream.write_bytes("\n".join([
        '{"before":null,"after":{"id":1,"name":"Ann"},"source":{"db":"d","schema":"s","table":"t","lsn":10},"op":"c"}',
        '{"before":null,"after":{"id":2,"name":"Zoë"},"source":{"db":"d","schema":"s","table":"t","lsn":11},"op":"c"}',
        '{"before":null,"after":{"id":3,"name":"Eve"},"source":{"db":"d","schema":"s","table":"t","lsn":12},"op":"c"}',
    ]).encode("latin-1"))

    (applied,) = lines(cli("apply", "--format", "debezium", "--input", str(stream), "--lake", lake, "--key", "s.t=id"))
    assert (applied["quarantined"], applied["tables"]["s.t"]["rows"]) == (1, 2)
    assert sorted((r["id"], r["name"]) for r in lines(cli("dump", "--lake", lake, "--table", "s.t"))) == [
        (1, "Ann"), (3, "Eve")]
    (held,) = lines(cli("quarantine", "list", "--lake", lake))
    assert held["reason"].startswith("unframed message: not UTF-8 text: byte 0xEB at character 41 of the message "
                                     "value"), held["reason"]
    assert (held["line"], held["byte_offset"]) == (2, 109)
    assert '"name":"Zo\\xEB"' in held["value"]

    (replayed,) = lines(cli("quarantine", "replay", "--lake", lake, "--key", "s.t=id"))
    assert (replayed["replayed"], replayed["batches"][0]["quarantined"]) == (1, 1)
    (again,) = lines(cli("quarantine", "list", "--lake", lake))
    assert "not valid JSON" in again["reason"] and again["value"] == held["value"]
    assert len(lines(cli("dump", "--lake", lake, "--table", "s.t"))) == 2
