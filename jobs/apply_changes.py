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

from cdclake.jobkit import job_parser, run_job


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = job_parser("apply_changes.py", __doc__)
    parser.add_argument("--batch-id", required=True, help="the normalized batch")
    parser.add_argument("--table", action="append", default=[], metavar="NAMESPACE.TABLE",
                        help="apply only this staged table (repeatable); the batch is then not marked applied")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> dict:
        from cdclake import pipeline
        from cdclake.settings import LakeSettings
        from cdclake.spark import get_spark

        settings = LakeSettings.from_env(args.lake)
        spark = get_spark(settings, app_name="cdclake-apply")
        try:
            if args.table:
                return pipeline.ApplyResult(args.source, args.batch_id, {
                    t: pipeline.apply_staged_table(spark, settings, source=args.source, batch_id=args.batch_id,
                                                   table_id=t) for t in args.table}).to_dict()
            return pipeline.apply_batch(spark, settings, source=args.source, batch_id=args.batch_id).to_dict()
        finally:
            spark.stop()

    return run_job("apply_changes.py", body, output=args.output)


if __name__ == "__main__":
    sys.exit(main())
