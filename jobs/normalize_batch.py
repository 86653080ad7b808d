"""spark-submit entry point: normalize a landed batch into canonical change records per table.

    spark-submit jobs/normalize_batch.py --source demo --batch-id 00000001 --format debezium --key customers=id

Prints the ``NormalizeResult`` as JSON. Exit status: 0 on success, 1 when normalizing failed, 2 on bad arguments
(including an unknown format or a malformed ``--key``).
"""

from __future__ import annotations

import argparse
import sys

from cdclake.jobkit import job_parser, run_job


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = job_parser("normalize_batch.py", __doc__)
    parser.add_argument("--batch-id", required=True, help="the landed batch")
    parser.add_argument("--format", dest="fmt", default="debezium", help="change-stream format (default: debezium)")
    parser.add_argument("--key", action="append", default=[], metavar="[TABLE=]COL[,COL...]",
                        help="primary key: TABLE=COLS for a table (over the stream's key), COLS for tables whose "
                             "stream carries none (repeatable)")
    parser.add_argument("--ddl-policy", action="append", default=[], metavar="[TABLE=]evolve|ignore|fail",
                        help="what DDL in the stream does to lake tables (default evolve; repeatable)")
    parser.add_argument("--time-zone", metavar="ZONE",
                        help="zone of timestamp texts without an offset, e.g. Asia/Shanghai (default UTC)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> dict:
        from cdclake import pipeline
        from cdclake.keys import KeySpec
        from cdclake.schema_changes import DdlPolicies
        from cdclake.settings import LakeSettings
        from cdclake.spark import get_spark

        keys = KeySpec.parse(args.key)
        settings = LakeSettings.from_env(args.lake)
        spark = get_spark(settings, app_name="cdclake-normalize")
        try:
            return pipeline.normalize_batch(spark, settings, source=args.source, batch_id=args.batch_id,
                                            fmt=args.fmt, keys=keys,
                                            ddl_policies=DdlPolicies.parse(args.ddl_policy),
                                            time_zone=args.time_zone).to_dict()
        finally:
            spark.stop()

    return run_job("normalize_batch.py", body, output=args.output)


if __name__ == "__main__":
    sys.exit(main())
