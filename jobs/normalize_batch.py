"""spark-submit entry point: normalize a landed batch into canonical change records per table.

    spark-submit jobs/normalize_batch.py --source demo --batch-id 00000001 --format debezium --key customers=id

Prints the ``NormalizeResult`` as JSON. Exit status: 0 on success, 1 when normalizing failed, 2 on bad arguments
(including an unknown format or a malformed ``--key``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="normalize_batch.py", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", help="lake root directory (default: $CDCLAKE_LAKE or ./lake)")
    parser.add_argument("--source", required=True, help="source name")
    parser.add_argument("--batch-id", required=True, help="the landed batch")
    parser.add_argument("--format", dest="fmt", default="debezium", help="change-stream format (default: debezium)")
    parser.add_argument("--key", action="append", default=[], metavar="[TABLE=]COL[,COL]",
                        help="primary key for a stream that carries none (repeatable)")
    parser.add_argument("--output", type=Path, help="also write the result JSON to this file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from cdclake import pipeline
    from cdclake.exceptions import CdclakeError, ConfigError
    from cdclake.keys import KeySpec
    from cdclake.settings import LakeSettings
    from cdclake.spark import get_spark

    try:
        keys = KeySpec.parse(args.key)
        settings = LakeSettings.from_env(args.lake)
        spark = get_spark(settings, app_name="cdclake-normalize")
        try:
            result = pipeline.normalize_batch(spark, settings, source=args.source, batch_id=args.batch_id,
                                              fmt=args.fmt, keys=keys)
        finally:
            spark.stop()
    except ConfigError as exc:
        print(f"normalize_batch.py: error: {exc}", file=sys.stderr)
        return 2
    except CdclakeError as exc:
        print(f"normalize_batch.py: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    text = json.dumps(result.to_dict(), indent=2, sort_keys=True)
    if args.output:
        args.output.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
