"""The demo: a simulated shop database's Debezium stream, ingested micro-batch by micro-batch by the Airflow DAG.

    python -m cdclake.demo.run [--lake DIR] [--keep] [--airflow-home DIR] [--kafka]

1. Starts from a fresh lake directory (default ``./lake/demo``; kept as it is with ``--keep``).
2. Generates the change stream (:func:`cdclake.demo.generator.generate`) into ``<lake>/stream/``.
3. For each micro-batch, moves its file into the inbox ``<lake>/inbox/`` and runs the ``cdclake_ingest`` DAG once
   with ``airflow dags test`` (one logical date per batch, an hour apart), logging to ``<lake>/logs/``.
4. Prints what each batch did to each table (the ``apply_changes`` task's return value).
5. Compares every lake table with the oracle's replay of the logical changes, row by row.
6. Summarizes the stored data-quality results, and prints the URL of the Data Quality page and how to open it
   (``airflow standalone`` on the same Airflow home and lake).

With ``--kafka`` the stream goes through Kafka instead of the inbox: the demo starts a local Tansu broker
(:mod:`cdclake.demo.tansu`), produces the whole stream to the topics ``demo.public.customers`` and
``demo.public.orders`` first, writes the source config ``<lake>/sources/demo.yaml`` (its ``kafka:`` section capped so
the stream lands in as many micro-batches as the file mode has), and runs the per-source DAG
``cdclake_sources__demo`` until a run finds nothing new and short-circuits. Steps 4-6 are the same.

Exit status 0 when every batch ran and every table matches the oracle, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

from cdclake import airflow_home
from cdclake.demo.generator import DemoStream, generate, write_batches
from cdclake.demo.oracle import expected_tables
from cdclake.exceptions import CdclakeError
from cdclake.settings import LakeSettings

DAG_ID = "cdclake_ingest"
SOURCE = "demo"
KAFKA_DAG_ID = f"cdclake_sources__{SOURCE}"
KAFKA_PARTITIONS = 3
FORMAT = "debezium"
FIRST_LOGICAL_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)
RUN_TIMEOUT_SECONDS = 30 * 60
LOG_TAIL_LINES = 30
DIFF_ROWS = 5
_MARKER = ".cdclake-demo"
DQ_PAGE_URL = "http://localhost:8080/cdclake-dq/"
"""The Data Quality page of ``airflow standalone`` (plugin ``plugins/cdclake_dq.py``)."""
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit): ")


class DemoError(CdclakeError):
    """The demo could not run to the end (a DAG run failed, or the lake directory is not the demo's)."""


def fresh_lake(lake: Path, *, keep: bool) -> None:
    """Prepare the lake directory: wiped (unless ``keep``), created, and marked as the demo's.

    Only a directory the demo created (it holds the ``.cdclake-demo`` marker) or an empty one is wiped, so a
    mistyped ``--lake`` cannot delete unrelated files.

    Raises:
        DemoError: ``lake`` exists, is not empty and is not a demo lake.
    """
    if lake.exists() and not keep:
        if not (lake / _MARKER).is_file() and any(lake.iterdir()):
            raise DemoError(f"{lake} exists and is not a demo lake (no {_MARKER} file); "
                            "choose another --lake or remove it yourself")
        shutil.rmtree(lake)
    lake.mkdir(parents=True, exist_ok=True)
    (lake / _MARKER).touch()


def deliver(batch_file: Path, inbox: Path) -> Path:
    """Move one generated batch file into the inbox atomically (a reader never sees half a file)."""
    inbox.mkdir(parents=True, exist_ok=True)
    target = inbox / batch_file.name
    tmp = inbox / f".{batch_file.name}.tmp"
    shutil.copyfile(batch_file, tmp)
    os.replace(tmp, target)
    return target


def run_dag(env: dict[str, str], logical_date: datetime, conf: dict[str, Any], log_path: Path, *,
            dag_id: str = DAG_ID) -> float:
    """Run a DAG once with ``airflow dags test``, its output going to ``log_path``.

    Returns:
        The run's duration in seconds.

    Raises:
        DemoError: The run failed or timed out; the message holds the end of its log.
    """
    command = [*airflow_home.airflow_command(), "dags", "test", dag_id, logical_date.isoformat(),
               "-c", json.dumps(conf)]
    started = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        # A session of its own, so a timeout can end the run's whole process group (Spark's JVM included).
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=RUN_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            code = None
    elapsed = time.monotonic() - started
    if code != 0:
        what = f"timed out after {RUN_TIMEOUT_SECONDS}s" if code is None else f"exited with {code}"
        errors = "\n".join(error_lines(log_path)) or "(no exception in the log)"
        raise DemoError(f"airflow dags test {dag_id} {logical_date.isoformat()} {what}.\n"
                        f"errors:\n{errors}\nlast lines of {log_path}:\n{log_tail(log_path)}")
    return elapsed


def error_lines(path: Path, limit: int = 5) -> list[str]:
    """The last few exception lines of a log (``pkg.SomeError: message`` and the lines continuing it)."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    with path.open(errors="replace") as handle:
        for line in handle:
            line = line.rstrip("\n")
            if _EXCEPTION_LINE.match(line):
                current = [line]
                blocks.append(current)
            elif current is not None and line.startswith("  ") and not line.lstrip().startswith("File "):
                current.append(line)
            else:
                current = None
    unique = list(dict.fromkeys("\n".join(block) for block in blocks))
    return unique[-limit:]


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a log file."""
    with path.open(errors="replace") as handle:
        return "".join(deque(handle, maxlen=lines)).rstrip()


def describe_counts(applied: dict[str, Any] | None) -> str:
    """One line of per-table effects from an ``apply_changes`` return value."""
    if not applied:
        return "nothing new landed, rest of the run skipped"
    parts = []
    for table, c in sorted(applied.get("tables", {}).items()):
        parts.append(f"{table} +{c['inserted']} ~{c['updated']} -{c['deleted']} "
                     f"(stale {c['skipped_stale']}) -> {c['rows_after']} rows")
    return "; ".join(parts) or "no table touched"


def compare(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> list[str]:
    """Differences between expected and actual rows (each row compared whole), as a few readable lines.

    Returns:
        An empty list when the rows are equal, in order.
    """
    if expected == actual:
        return []
    exp = [json.dumps(r, default=str) for r in expected]
    act = [json.dumps(r, default=str) for r in actual]
    exp_set, act_set = set(exp), set(act)
    missing = [r for r in exp if r not in act_set]
    unexpected = [r for r in act if r not in exp_set]
    lines = [f"expected {len(expected)} rows, lake has {len(actual)}; "
             f"{len(missing)} expected rows missing, {len(unexpected)} rows not expected"]
    lines += [f"  - {r}" for r in missing[:DIFF_ROWS]]
    lines += [f"  + {r}" for r in unexpected[:DIFF_ROWS]]
    if not missing and not unexpected:
        lines.append("  same rows, different order (or duplicates)")
    return lines


def _print(line: str = "") -> None:
    print(line, flush=True)


def run(lake: Path, *, keep: bool, home: Path | None) -> int:
    """Run the demo end to end; see the module docstring.

    Returns:
        0 when every table matches the oracle, 1 otherwise.

    Raises:
        DemoError: A DAG run failed.
    """
    lake = lake.expanduser().resolve()
    fresh_lake(lake, keep=keep)
    settings = LakeSettings.from_env(lake)
    inbox = lake / "inbox"
    stream: DemoStream = generate()
    batch_files = write_batches(stream, lake / "stream")
    _print(f"demo: {len(stream.changes)} row changes in {len(batch_files)} micro-batches -> lake {lake}")

    env = airflow_home.prepare(home)
    env["CDCLAKE_LAKE"] = str(lake)
    env["CDCLAKE_INBOX"] = str(inbox)
    conf = {"source": SOURCE, "format": FORMAT, "lake": str(lake), "inbox": str(inbox), "keys": []}

    applied_by_batch: list[dict[str, Any] | None] = []
    data_docs: str | None = None
    for number, (batch_file, messages) in enumerate(zip(batch_files, stream.batches, strict=True), start=1):
        deliver(batch_file, inbox)
        logical_date = FIRST_LOGICAL_DATE + timedelta(hours=number - 1)
        log_path = lake / "logs" / f"{batch_file.stem}.log"
        elapsed = run_dag(env, logical_date, conf, log_path)
        applied = airflow_home.run_xcom(env, DAG_ID, logical_date, "apply_changes")
        validated = airflow_home.run_xcom(env, DAG_ID, logical_date, "validate_tables")
        applied_by_batch.append(applied)
        if validated:
            data_docs = validated.get("data_docs_index") or data_docs
        dq = "" if validated is None else f" dq {describe_statuses(validated)}"
        _print(f"batch {number}/{len(batch_files)} ({len(messages)} messages, {logical_date:%Y-%m-%dT%H:%M}) "
               f"ok in {elapsed:.0f}s:{dq} {describe_counts(applied)}")

    return report(settings, stream, applied_by_batch, data_docs=data_docs, home=Path(env["AIRFLOW_HOME"]))


def kafka_source_yaml(bootstrap: str, topics: Sequence[str], max_records: int) -> str:
    """The demo's source config for Kafka mode (``<lake>/sources/demo.yaml``)."""
    return (f"# Written by the demo (python -m cdclake.demo.run --kafka).\nname: {SOURCE}\nformat: {FORMAT}\n"
            "schedule: null\nretries: 0\nkafka:\n"
            f"  bootstrap: {json.dumps(bootstrap)}\n  topics: {json.dumps(list(topics))}\n"
            f"  group: cdclake-{SOURCE}\n  max_records: {max_records}\n")


def run_kafka(lake: Path, *, keep: bool, home: Path | None) -> int:
    """The demo through Kafka (``--kafka``): produce the stream to a local broker, then land and apply it with the
    per-source DAG until a run finds nothing new; see the module docstring.

    Returns:
        0 when every table matches the oracle, 1 otherwise.

    Raises:
        DemoError: A DAG run failed, or the demo did not drain the topics in the expected number of runs.
        BrokerError: The broker could not start.
    """
    from cdclake.demo.produce import produce_lines
    from cdclake.demo.tansu import EXACT_WATERMARK_PRODUCER, start_broker

    if keep:
        raise DemoError("--keep does not go with --kafka: the demo's broker starts with empty topics, while a kept "
                        "lake remembers the offsets an earlier broker had")
    lake = lake.expanduser().resolve()
    fresh_lake(lake, keep=False)
    settings = LakeSettings.from_env(lake)
    stream: DemoStream = generate()
    lines = [line for batch in stream.batches for line in batch]
    broker = start_broker(lake / "logs")
    try:
        # One record per producer batch: this Tansu build's high watermarks are exact only then.
        counts = produce_lines(broker.bootstrap, lines, partitions=KAFKA_PARTITIONS,
                               producer_config=EXACT_WATERMARK_PRODUCER)
        max_records = -(-len(lines) // len(stream.batches))
        sources = lake / "sources"
        sources.mkdir(exist_ok=True)
        (sources / f"{SOURCE}.yaml").write_text(kafka_source_yaml(broker.bootstrap, sorted(counts), max_records))
        _print(f"demo: {len(stream.changes)} row changes, {len(lines)} messages produced to "
               f"{', '.join(f'{t} ({n})' for t, n in sorted(counts.items()))} on the local Tansu broker "
               f"{broker.bootstrap}; landing at most {max_records} per run -> lake {lake}")

        env = airflow_home.prepare(home)
        env.update(CDCLAKE_LAKE=str(lake), CDCLAKE_SOURCES_DIR=str(sources))
        applied_by_batch: list[dict[str, Any] | None] = []
        for number in range(1, len(stream.batches) + 2):
            logical_date = FIRST_LOGICAL_DATE + timedelta(hours=number - 1)
            elapsed = run_dag(env, logical_date, {}, lake / "logs" / f"kafka-run-{number:04d}.log",
                              dag_id=KAFKA_DAG_ID)
            landed = airflow_home.run_xcom(env, KAFKA_DAG_ID, logical_date, "land_batch")
            if landed is None:
                _print(f"run {number} ({logical_date:%Y-%m-%dT%H:%M}) ok in {elapsed:.0f}s: no new offsets on the "
                       "topics, rest of the run skipped")
                break
            applied = airflow_home.run_xcom(env, KAFKA_DAG_ID, logical_date, "mark_applied") or {}
            tables = {"tables": applied.get(landed["batches"][0], {})}
            applied_by_batch.append(tables)
            lag = sum(n for parts in landed["lag"].values() for n in parts.values())
            _print(f"run {number} ({logical_date:%Y-%m-%dT%H:%M}) ok in {elapsed:.0f}s: batch {landed['batches'][0]},"
                   f" lag after it {lag}: {describe_counts(tables)}")
        else:
            raise DemoError(f"the topics were not drained in {len(stream.batches) + 1} runs of {KAFKA_DAG_ID}")
    finally:
        broker.stop()
    return report(settings, stream, applied_by_batch, data_docs=None, home=Path(env["AIRFLOW_HOME"]),
                  ui_env={"CDCLAKE_SOURCES_DIR": str(sources)})


def report(settings: LakeSettings, stream: DemoStream, applied_by_batch: Sequence[dict[str, Any] | None], *,
           data_docs: str | None, home: Path, ui_env: dict[str, str] | None = None) -> int:
    """Print per-table results and the comparison with the oracle.

    ``ui_env`` are further variables the printed ``airflow standalone`` command needs (the Kafka mode's sources).

    Returns:
        0 when every table matches, 1 otherwise.
    """
    from cdclake.reader import dump_rows, list_tables

    expected = expected_tables(stream.changes)
    lake_tables = list_tables(settings)
    _print()
    _print("per table (inserted/updated/deleted/stale-skipped per batch):")
    for table in sorted(set(expected) | set(lake_tables)):
        cells = []
        for applied in applied_by_batch:
            c = (applied or {}).get("tables", {}).get(table)
            cells.append("-" if c is None else f"{c['inserted']}/{c['updated']}/{c['deleted']}/{c['skipped_stale']}")
        _print(f"  {table:<20} {'  '.join(f'b{i}={cell}' for i, cell in enumerate(cells, start=1))}")

    _print()
    _print("lake vs oracle:")
    mismatches = 0
    for table in sorted(set(expected) | set(lake_tables)):
        if table not in lake_tables:
            _print(f"  MISMATCH {table}: not in the lake (oracle has {len(expected[table])} rows)")
            mismatches += 1
            continue
        actual = dump_rows(settings, table)
        if table not in expected:
            _print(f"  MISMATCH {table}: in the lake ({len(actual)} rows) but not in the oracle")
            mismatches += 1
            continue
        diff = compare(expected[table], actual)
        if diff:
            mismatches += 1
            _print(f"  MISMATCH {table}: {diff[0]}")
            for line in diff[1:]:
                _print(f"    {line}")
        else:
            _print(f"  MATCH    {table}: {len(actual)} rows")

    docs = Path(data_docs) if data_docs else settings.dq_root
    _print()
    _print(f"data quality: {describe_dq_results(settings)}")
    _print(f"  Data Docs at {docs}" + ("" if docs.exists() else " (missing!)"))
    _print(f"run logs: {settings.root / 'logs'}")
    _print(f"Data Quality page: {DQ_PAGE_URL} (Airflow UI, navigation entry 'Data Quality'; each DAG run has a "
           "'Data Quality' tab)")
    extra = "".join(f"{k}={v} " for k, v in (ui_env or {}).items())
    _print(f"  open it with: PATH={Path(sys.executable).parent}:$PATH CDCLAKE_LAKE={settings.root} {extra}"
           f"AIRFLOW_HOME={home} airflow standalone")
    passwords = home / "simple_auth_manager_passwords.json.generated"
    _print(f"  then log in at http://localhost:8080 as admin (password in {passwords}); the DAG starts paused")
    if mismatches:
        _print(f"demo FAILED: {mismatches} table(s) differ from the oracle")
        return 1
    _print(f"demo OK: {len(expected)} tables match the oracle")
    return 0


def describe_statuses(validated: dict[str, Any]) -> str:
    """``ok`` when every table passed, else the tables that did not and their status (from the XCom report)."""
    tables = validated.get("tables") or {}
    other = [f"{t} {v.get('status')}" for t, v in sorted(tables.items()) if v.get("status") != "passed"]
    if not other:
        return "ok" if validated.get("success", True) else "FAILED"
    return ", ".join(other)


def describe_dq_results(settings: LakeSettings) -> str:
    """One line about the stored validation results: latest status per table (read with pyiceberg)."""
    from cdclake.dq_results import TABLE, read_rows

    latest: dict[str, str] = {}
    rows = read_rows(settings)
    for row in rows:  # newest first
        latest.setdefault(row["table_id"], row["status"] or "?")
    tables = ", ".join(f"{t} {s}" for t, s in sorted(latest.items())) or "no tables validated"
    return f"{len(rows)} expectation results in {TABLE}; latest: {tables}"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (``python -m cdclake.demo.run``)."""
    parser = argparse.ArgumentParser(prog="python -m cdclake.demo.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", type=Path, default=Path("lake/demo"),
                        help="lake directory (default: ./lake/demo); wiped first unless --keep")
    parser.add_argument("--keep", action="store_true", help="keep the lake directory as it is")
    parser.add_argument("--airflow-home", type=Path, help="AIRFLOW_HOME to use (default: <repo>/.airflow)")
    parser.add_argument("--kafka", action="store_true",
                        help="produce the stream to a local Tansu broker first, then land it from the topics")
    args = parser.parse_args(argv)
    try:
        return (run_kafka if args.kafka else run)(args.lake, keep=args.keep, home=args.airflow_home)
    except CdclakeError as exc:
        print(f"demo FAILED: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
