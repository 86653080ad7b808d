"""spark-submit entry point: apply a normalized batch to the lake's Iceberg tables.

    spark-submit jobs/apply_changes.py --source demo --batch-id 00000001 --output applied.json

Prints the ``ApplyResult`` (inserted/updated/deleted/skipped counts per table) as JSON. Exit status: 0 on success,
1 when applying failed, 2 on bad arguments.
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
    parser = _Parser(prog="apply_changes.py", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", help="lake root directory (default: $CDCLAKE_LAKE or ./lake)")
    parser.add_argument("--source", required=True, help="source name")
    parser.add_argument("--batch-id", required=True, help="the normalized batch")
    parser.add_argument("--output", type=Path, help="also write the result JSON to this file "
                                                    "(validate_tables.py --applied reads it)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from cdclake import pipeline
    from cdclake.exceptions import CdclakeError, ConfigError
    from cdclake.settings import LakeSettings
    from cdclake.spark import get_spark

    try:
        settings = LakeSettings.from_env(args.lake)
        spark = get_spark(settings, app_name="cdclake-apply")
        try:
            result = pipeline.apply_batch(spark, settings, source=args.source, batch_id=args.batch_id)
        finally:
            spark.stop()
    except ConfigError as exc:
        print(f"apply_changes.py: error: {exc}", file=sys.stderr)
        return 2
    except CdclakeError as exc:
        print(f"apply_changes.py: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    text = json.dumps(result.to_dict(), indent=2, sort_keys=True)
    if args.output:
        args.output.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
