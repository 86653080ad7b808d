"""The ``cdclake`` command line: a stable contract other tooling drives.

    cdclake apply --format FORMAT --input PATH [PATH ...] --lake DIR [--key [TABLE=]COL[,COL...]] [--source NAME]
                  [--time-zone ZONE]
    cdclake apply --format FORMAT --kafka BOOTSTRAP --topics T1[,T2...] --lake DIR [--max-records N] [...]
    cdclake tables --lake DIR
    cdclake dump --lake DIR --table NAME [--all]
    cdclake quarantine list --lake DIR [--source NAME] [--batch ID] [--reason TEXT]
    cdclake quarantine replay --lake DIR [--source NAME] [--reason TEXT] [--format FORMAT] [--key ...]
                              [--ddl-policy ...] [--time-zone ZONE]
    cdclake dq results --lake DIR [--table NAME] [--run ID]
    cdclake dq held --lake DIR [--source NAME]
    cdclake dq release --lake DIR --source NAME --batch ID --table NAME   # validates again; exit 1: held again

``apply`` lands the inputs (or everything new on Kafka topics since the offsets the lake landed last) as the next
micro-batch of the lake, normalizes and applies it, and prints one JSON object (with ``lag`` per topic and partition
for Kafka). Bad arguments or unreadable input: a one-line error on stderr and exit code 2. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Any, Sequence

from cdclake.exceptions import ApplyFailedError, CdclakeError, ConfigError
from cdclake.formats import FORMATS
from cdclake.landing import FRAMINGS, check_source_name

if TYPE_CHECKING:
    from cdclake.settings import LakeSettings

log = logging.getLogger("cdclake")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        sys.stderr.write(f"cdclake: error: {message}\n")
        raise SystemExit(2)


_EXISTING_LAKE = "lake directory (an error if it does not exist)"


def _table_id(text: str) -> str:
    """A ``--table`` value: ``namespace.table``, as the lake names it or as the source spells it (``SHOP.Items``,
    ``shop.gmall-2020-04``: the lake's id lower-cases the parts and reduces them to ``[a-z0-9_]``)."""
    from cdclake.identity import sanitize

    if "." not in text.strip(".") or not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not a namespace.table (`cdclake tables` lists them)")
    namespace, _, table = text.strip().partition(".")
    return f"{sanitize(namespace)}.{sanitize(table)}"


def _source(text: str) -> str:
    """A ``--source`` value: a name that can name the source's directories in the lake."""
    try:
        return check_source_name(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _batch_id(text: str) -> str:
    """A ``--batch`` value: a batch id, whose leading zeros may be left out (``3`` is ``00000003``; an id written
    with leading zeros is taken as written)."""
    from cdclake.landing import BATCH_ID_WIDTH

    value = text.strip()
    return value.zfill(BATCH_ID_WIDTH) if value.isdigit() and not value.startswith("0") else value


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser."""
    parser = _Parser(prog="cdclake", description="CDC change streams into validated Apache Iceberg tables.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO level on stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    apply = sub.add_parser("apply", help="land input files as the next micro-batch, normalize and apply it")
    apply.add_argument("--format", required=True, choices=FORMATS, help="change-stream format of the input")
    origin = apply.add_mutually_exclusive_group(required=True)
    origin.add_argument("--input", nargs="+", metavar="PATH", help="input files, directories or s3:// prefixes")
    origin.add_argument("--kafka", metavar="BOOTSTRAP",
                        help="land from Kafka: bootstrap servers host:port[,...] (security settings from "
                             "CDCLAKE_KAFKA_SECURITY_PROTOCOL, CDCLAKE_KAFKA_SASL_*, CDCLAKE_KAFKA_SSL_*)")
    apply.add_argument("--topics", metavar="T1[,T2...]", help="with --kafka: the topics to land")
    apply.add_argument("--topic-pattern", metavar="REGEX", help="with --kafka: land every topic matching REGEX")
    apply.add_argument("--group", metavar="ID", help="with --kafka: consumer group for the advisory offset commits "
                                                     "(default: CDCLAKE_KAFKA_GROUP_ID, else cdclake-<source>)")
    apply.add_argument("--max-records", type=int, metavar="N",
                       help="with --kafka: at most N offsets in this batch (default 1000000)")
    apply.add_argument("--offset-reset", choices=("fail", "earliest"),
                       help="with --kafka: when a partition's offsets went backwards (topic recreated), stop "
                            "(fail, the default) or land it again from its first offset (earliest)")
    apply.add_argument("--lake", required=True, metavar="DIR", help="lake directory (created if missing)")
    apply.add_argument("--key", action="append", default=[], metavar="[TABLE=]COL[,COL...]",
                       help="primary key: TABLE=COLS for a table (over the stream's key), COLS for tables whose "
                            "stream carries none (repeatable)")
    apply.add_argument("--ddl-policy", action="append", default=[], metavar="[TABLE=]evolve|ignore|fail",
                       help="what DDL in the stream does to lake tables (default evolve; repeatable per table); "
                            "a table stopped by `fail` makes the exit code 3")
    apply.add_argument("--time-zone", metavar="ZONE",
                       help="zone of timestamp texts without an offset (canal/TiCDC MySQL TIMESTAMP, CKafka TIME): "
                            "the source server's, e.g. Asia/Shanghai or +08:00 (default UTC)")
    apply.add_argument("--source", type=_source, default="default",
                       help="source name: batches are numbered per source")
    apply.add_argument("--framing", default="auto", choices=FRAMINGS, help="input framing (default: detect)")
    apply.add_argument("--validate", action="store_true", help="also run the data-quality suites")

    tables = sub.add_parser("tables", help="list the lake's tables as a JSON list")
    tables.add_argument("--lake", required=True, metavar="DIR", help=_EXISTING_LAKE)

    dump = sub.add_parser("dump", help="print a table's rows as JSON Lines sorted by primary key")
    dump.add_argument("--lake", required=True, metavar="DIR", help=_EXISTING_LAKE)
    dump.add_argument("--table", required=True, metavar="NAME", type=_table_id,
                      help="namespace.table (see `cdclake tables`)")
    dump.add_argument("--all", action="store_true", help="include the _cdc_* bookkeeping columns")

    q = sub.add_parser("quarantine", help="inspect and replay quarantined messages")
    qsub = q.add_subparsers(dest="action", required=True, parser_class=_Parser)
    qlist = qsub.add_parser("list", help="print quarantined messages as JSON Lines (reason, where, raw text)")
    qlist.add_argument("--lake", required=True, metavar="DIR", help=_EXISTING_LAKE)
    qlist.add_argument("--source", type=_source, help="only this source")
    qlist.add_argument("--batch", type=_batch_id, help="only this batch id (3 or 00000003)")
    qlist.add_argument("--reason", metavar="TEXT", help="only reasons containing TEXT (case-insensitive)")
    replay = qsub.add_parser("replay", help="re-run quarantined messages through the current code as a new batch")
    replay.add_argument("--lake", required=True, metavar="DIR", help=_EXISTING_LAKE)
    replay.add_argument("--source", type=_source, help="only this source")
    replay.add_argument("--reason", metavar="TEXT", help="only reasons containing TEXT (case-insensitive)")
    replay.add_argument("--format", choices=FORMATS, help="read them as this format (default: as quarantined)")
    replay.add_argument("--key", action="append", default=[], metavar="[TABLE=]COL[,COL...]",
                        help="primary key for tables whose messages carry none (repeatable)")
    replay.add_argument("--ddl-policy", action="append", default=[], metavar="[TABLE=]evolve|ignore|fail",
                        help="DDL policy for the replayed messages (e.g. after a `fail` stop)")
    replay.add_argument("--time-zone", metavar="ZONE",
                        help="zone of timestamp texts without an offset, as for apply (default UTC)")

    dq = sub.add_parser("dq", help="data-quality results, and batches held back by the quarantine policy")
    dqsub = dq.add_subparsers(dest="action", required=True, parser_class=_Parser)
    results = dqsub.add_parser("results", help="print stored validation results (cdclake_meta.dq_results) as "
                                               "JSON Lines, newest first")
    results.add_argument("--lake", required=True, metavar="DIR", help=_EXISTING_LAKE)
    results.add_argument("--table", metavar="NAME", type=_table_id, help="only this namespace.table")
    results.add_argument("--run", metavar="ID", help="only this run id")
    held = dqsub.add_parser("held", help="print the (source, batch, table) changes held back, as JSON Lines")
    held.add_argument("--lake", required=True, metavar="DIR", help=_EXISTING_LAKE)
    held.add_argument("--source", type=_source, help="only this source")
    release = dqsub.add_parser("release", help="apply held-back changes of a batch to their table after a fix and "
                                               "validate again; changes that still fail are held again (exit 1)")
    release.add_argument("--lake", required=True, metavar="DIR", help=_EXISTING_LAKE)
    release.add_argument("--source", type=_source, required=True)
    release.add_argument("--batch", required=True, metavar="ID", type=_batch_id)
    release.add_argument("--table", required=True, metavar="NAME", type=_table_id)
    return parser


def _apply(args: argparse.Namespace) -> int:
    from cdclake import pipeline
    from cdclake.config import check_time_zone
    from cdclake.keys import KeySpec
    from cdclake.schema_changes import DdlPolicies
    from cdclake.settings import LakeSettings
    from cdclake.spark import check_process_lake, get_spark

    keys = KeySpec.parse(args.key)
    policies = DdlPolicies.parse(args.ddl_policy)
    if args.time_zone:
        check_time_zone(args.time_zone)  # before landing: a bad flag must not leave a landed, unapplied batch
    settings = LakeSettings.from_env(args.lake)
    check_process_lake(settings)  # before landing, like the time zone
    if args.kafka:
        from cdclake.kafka import KafkaSource

        if bool(args.topics) == bool(args.topic_pattern):
            raise ConfigError("--kafka needs exactly one of --topics T1[,T2...] or --topic-pattern REGEX")
        source = KafkaSource.from_config(args.kafka, topics=args.topics, pattern=args.topic_pattern,
                                         group_id=args.group or os.environ.get("CDCLAKE_KAFKA_GROUP_ID")
                                         or f"cdclake-{args.source}", max_batch_records=args.max_records,
                                         offset_reset=args.offset_reset)
        landed = pipeline.next_kafka_batch(settings, source=args.source, kafka=source,
                                           spark=lambda: get_spark(settings))
    else:
        for flag in ("topics", "topic_pattern", "group", "max_records", "offset_reset"):
            if getattr(args, flag) is not None:
                raise ConfigError(f"--{flag.replace('_', '-')} only applies with --kafka")
        landed = pipeline.land_inputs(settings, source=args.source, inputs=args.input, framing=args.framing)
    if landed.batch_id is None:
        nothing: dict[str, object] = {"batch_id": None, "source": args.source, "messages": 0, "tables": {},
                                      "quarantined": 0, "skipped": {}}
        if landed.lag is not None:
            nothing["lag"] = landed.lag
        print(json.dumps(nothing))
        return 0
    spark = get_spark(settings)
    # Batches an earlier run landed and did not apply (it stopped): first, in order, as a scheduled run does.
    resumed = pipeline.unapplied_before(settings, args.source, landed.batch_id)
    for batch_id in resumed:
        sys.stderr.write(f"cdclake: batch {batch_id} of source {args.source} was landed but not applied (an earlier "
                         "run stopped): applying it first\n")
        pipeline.normalize_batch(spark, settings, source=args.source, batch_id=batch_id, fmt=args.format, keys=keys,
                                 ddl_policies=policies, time_zone=args.time_zone)
        pipeline.apply_batch(spark, settings, source=args.source, batch_id=batch_id)
    normalized = pipeline.normalize_batch(spark, settings, source=args.source, batch_id=landed.batch_id,
                                          fmt=args.format, keys=keys, ddl_policies=policies,
                                          time_zone=args.time_zone)
    applied = pipeline.apply_batch(spark, settings, source=args.source, batch_id=landed.batch_id)
    out = {
        "batch_id": landed.batch_id,
        "source": args.source,
        "new_batch": landed.created,
        "messages": landed.message_count,
        "tables": {tid: c.summary() for tid, c in applied.tables.items()},
        "quarantined": normalized.quarantined,
        "skipped": normalized.skipped,
        **({"resumed_batches": resumed} if resumed else {}),
    }
    if landed.lag is not None:
        out["lag"] = landed.lag
    if normalized.ddl_stopped:
        out["ddl_stopped"] = normalized.ddl_stopped
    failed_validation = _validate(spark, settings, args.source, applied, out) if args.validate else None
    print(json.dumps(out))
    for tid, why in normalized.ddl_stopped.items():
        sys.stderr.write(f"cdclake: {tid}: {why}\n")
    if normalized.quarantined and not applied.tables and normalized.quarantined >= landed.message_count:
        sys.stderr.write(f"cdclake: warning: every message of batch {landed.batch_id} was quarantined (is --format "
                         f"{args.format} right? `cdclake quarantine list --lake {args.lake} --batch "
                         f"{landed.batch_id}` shows why)\n")
    if failed_validation:
        sys.stderr.write(f"cdclake: {failed_validation}\n")
        return 1
    return 3 if normalized.ddl_stopped else 0


def _validate(spark: Any, settings: Any, source: str, applied: Any, out: dict[str, Any]) -> str | None:
    """``--validate``: the data-quality gate on the applied batch, as the DAGs run it (each table's policy from
    ``CDCLAKE_DQ_POLICY``, results stored in ``cdclake_meta.dq_results``, a ``quarantine`` table's changes held);
    adds ``validation`` to ``out``. Returns the failure text when a ``fail`` table failed, else None. A malformed
    user suite prints the summary before the error (the batch is applied)."""
    from cdclake import dq_results
    from cdclake.dq_config import DqConfig
    from cdclake.dq_gate import ValidationFailedError, gate_batch

    failure = None
    try:
        report = gate_batch(spark, settings, source=source, applied=applied, config=DqConfig.from_env(),
                            run_id=f"cli-{source}-{applied.batch_id}")
    except ValidationFailedError as exc:
        report, failure = exc.report, str(exc)
    except ConfigError:
        print(json.dumps(out))
        raise
    out["validation"] = {tid: {"success": t["status"] != dq_results.STATUS_FAILED, **t,
                               "report": report["data_docs_index"]} for tid, t in report["tables"].items()}
    return failure


def _existing_lake(lake: str | None) -> "LakeSettings":
    """The settings of a lake a command reads: its directory must exist (a mistyped ``--lake`` is an error, not an
    empty lake)."""
    from cdclake.settings import LakeSettings

    settings = LakeSettings.from_env(lake)
    if not settings.root.is_dir():
        raise ConfigError(f"no lake at {settings.root}: the directory does not exist (check --lake or CDCLAKE_LAKE; "
                          "`cdclake apply` makes a lake)")
    return settings


def _tables(args: argparse.Namespace) -> int:
    from cdclake.reader import list_tables

    print(json.dumps(list_tables(_existing_lake(args.lake))))
    return 0


def _dump(args: argparse.Namespace) -> int:
    from cdclake.reader import dump_rows

    for row in dump_rows(_existing_lake(args.lake), args.table, all_columns=args.all):
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


def _quarantine(args: argparse.Namespace) -> int:
    settings = _existing_lake(args.lake)
    if args.action == "list":
        from cdclake.reader import quarantine_rows

        for row in quarantine_rows(settings, source=args.source, batch_id=args.batch, reason=args.reason):
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        return 0
    from cdclake.keys import KeySpec
    from cdclake.pipeline import replay_quarantine
    from cdclake.schema_changes import DdlPolicies
    from cdclake.spark import get_spark

    results = replay_quarantine(get_spark(settings), settings, source=args.source, reason=args.reason,
                                fmt=args.format, keys=KeySpec.parse(args.key),
                                ddl_policies=DdlPolicies.parse(args.ddl_policy), time_zone=args.time_zone)
    print(json.dumps({"replayed": sum(r.replayed for r in results), "batches": [r.to_dict() for r in results]}))
    return 0


def _dq(args: argparse.Namespace) -> int:
    from cdclake import dq_hold

    settings = _existing_lake(args.lake)
    if args.action == "results":
        from cdclake.dq_results import read_rows

        for row in read_rows(settings):
            wanted_table = args.table is None or row["table_id"] == args.table
            if wanted_table and (args.run is None or row["run_id"] == args.run):
                sys.stdout.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        return 0
    if args.action == "held":
        for record in dq_hold.list_held(settings, source=args.source):
            sys.stdout.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
        return 0
    from cdclake.dq_gate import ValidationFailedError, release, table_settings
    from cdclake.spark import get_spark

    config, options = table_settings(args.source, args.table)
    try:
        report = release(get_spark(settings), settings, source=args.source, batch_id=args.batch,
                         table_id=args.table, config=config, options=options)
    except ValidationFailedError as exc:
        print(json.dumps(_release_summary(args, exc.report)))
        sys.stderr.write(f"cdclake: {exc}\n")
        return 1
    print(json.dumps(_release_summary(args, report)))
    return 0


def _release_summary(args: argparse.Namespace, report: dict[str, object]) -> dict[str, object]:
    table = report["tables"][args.table]  # type: ignore[index]
    return {"source": args.source, "batch_id": args.batch, "table": args.table, "status": table["status"],
            "failed": table["failed"], "run_id": report["summaries"][0]["run_id"],  # type: ignore[index]
            **report["counts"]}  # type: ignore[dict-item]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 bad arguments or input, 3 a DDL policy `fail` stopped a table,
    1 unexpected failure)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers = {"apply": _apply, "tables": _tables, "dump": _dump, "quarantine": _quarantine, "dq": _dq}
    try:
        return handlers[args.command](args)
    except ApplyFailedError as exc:  # not the input's fault as far as we know: each table's traceback is logged
        sys.stderr.write(f"cdclake: error: {exc}\n")
        return 1
    except CdclakeError as exc:
        sys.stderr.write(f"cdclake: error: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
