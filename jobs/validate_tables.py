"""spark-submit entry point: validate the tables a batch touched and publish the data-quality report.

    spark-submit jobs/validate_tables.py --source demo --applied applied.json --run-id nightly-42

``--applied`` is the JSON that ``apply_changes.py --output`` wrote. Prints ``{"success", "summaries"}`` as JSON.
Exit status: 0 when every expectation passed, 1 when one failed or validation could not run, 2 on bad arguments.
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
    parser = _Parser(prog="validate_tables.py", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", help="lake root directory (default: $CDCLAKE_LAKE or ./lake)")
    parser.add_argument("--source", required=True, help="source name")
    parser.add_argument("--applied", type=Path, required=True, metavar="FILE",
                        help="ApplyResult JSON written by apply_changes.py --output")
    parser.add_argument("--run-id", help="name of the validation run (default: <source>-<batch id>)")
    parser.add_argument("--output", type=Path, help="also write the result JSON to this file")
    args = parser.parse_args(argv)
    try:
        args.applied_data = json.loads(args.applied.read_text())
    except (OSError, ValueError) as exc:
        parser.error(f"--applied {args.applied}: {exc}")
    if not isinstance(args.applied_data, dict) or not {"batch_id", "tables"} <= args.applied_data.keys():
        parser.error(f"--applied {args.applied}: not an ApplyResult (expected batch_id and tables)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from cdclake import pipeline
    from cdclake.exceptions import CdclakeError, ConfigError
    from cdclake.pipeline import ApplyResult
    from cdclake.settings import LakeSettings
    from cdclake.spark import get_spark

    try:
        applied = ApplyResult.from_dict({"source": args.source, **args.applied_data})
        settings = LakeSettings.from_env(args.lake)
        spark = get_spark(settings, app_name="cdclake-validate")
        run_id = args.run_id or f"{args.source}-{applied.batch_id}"
        try:
            summaries = pipeline.validate_batch(spark, settings, source=args.source, batch_id=applied.batch_id,
                                                applied=applied, run_id=run_id)
        finally:
            spark.stop()
    except ConfigError as exc:
        print(f"validate_tables.py: error: {exc}", file=sys.stderr)
        return 2
    except CdclakeError as exc:
        print(f"validate_tables.py: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    success = all(s.success for s in summaries)
    text = json.dumps({"success": success, "summaries": [s.to_dict() for s in summaries]}, indent=2, sort_keys=True)
    if args.output:
        args.output.write_text(text + "\n")
    print(text)
    for summary in summaries:
        for failure in summary.failed():
            print(f"validate_tables.py: failed: {failure}", file=sys.stderr)
    return 0 if success else 1


if __name__ == "__main__":
    sys.exit(main())
