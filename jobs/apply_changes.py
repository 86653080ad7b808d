"""spark-submit entry point: apply a normalized batch to the lake's Iceberg tables.

    spark-submit jobs/apply_changes.py --source demo --batch-id 00000001 --output applied.json
    spark-submit jobs/apply_changes.py --source demo --batch-id 00000001 --table public.orders

Prints the ``ApplyResult`` (inserted/updated/deleted/skipped counts per table) as JSON. Without ``--table`` every
staged table is applied and the batch is marked applied; with ``--table`` (repeatable) only those tables are, and
marking the batch is left to the caller (the per-source DAG does it once every table task succeeded). Exit status:
0 on success, 1 when applying failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Callable

from cdclake.jobkit import job_parser, run_job

if TYPE_CHECKING:
    from cdclake.apply_options import ApplyOptions


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = job_parser("apply_changes.py", __doc__)
    parser.add_argument("--batch-id", required=True, help="the normalized batch")
    parser.add_argument("--table", action="append", default=[], metavar="NAMESPACE.TABLE",
                        help="apply only this staged table (repeatable); the batch is then not marked applied")
    return parser.parse_args(argv)


def source_table_options(source: str) -> Callable[[str], "ApplyOptions"]:
    """Per-table apply options from the source's config file (``include/sources/<source>.yaml`` or
    ``CDCLAKE_SOURCES_DIR``), or cdclake's defaults when the source has none."""
    from cdclake.apply_options import ApplyOptions
    from cdclake.config import load_sources

    config = load_sources().get(source)
    if config is None:
        return lambda table_id: ApplyOptions()
    return lambda table_id: config.table_options(table_id).apply_options()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> dict:
        from cdclake import pipeline
        from cdclake.settings import LakeSettings
        from cdclake.spark import get_spark

        settings = LakeSettings.from_env(args.lake)
        options = source_table_options(args.source)
        spark = get_spark(settings, app_name="cdclake-apply")
        try:
            if args.table:
                return pipeline.ApplyResult(args.source, args.batch_id, {
                    t: pipeline.apply_staged_table(spark, settings, source=args.source, batch_id=args.batch_id,
                                                   table_id=t, options=options(t)) for t in args.table}).to_dict()
            staged = pipeline.staged_table_ids(settings, args.source, args.batch_id)
            return pipeline.apply_batch(spark, settings, source=args.source, batch_id=args.batch_id,
                                        options={t: options(t) for t in staged}).to_dict()
        finally:
            spark.stop()

    return run_job("apply_changes.py", body, output=args.output)


if __name__ == "__main__":
    sys.exit(main())
