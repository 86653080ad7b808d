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

from cdclake.jobkit import job_parser, run_job


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = job_parser("validate_tables.py", __doc__)
    parser.add_argument("--applied", type=Path, required=True, metavar="FILE",
                        help="ApplyResult JSON written by apply_changes.py --output")
    parser.add_argument("--run-id", help="name of the validation run (default: <source>-<batch id>)")
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

    def body() -> dict:
        from cdclake import pipeline
        from cdclake.pipeline import ApplyResult
        from cdclake.settings import LakeSettings
        from cdclake.spark import get_spark

        applied = ApplyResult.from_dict({"source": args.source, **args.applied_data})
        settings = LakeSettings.from_env(args.lake)
        spark = get_spark(settings, app_name="cdclake-validate")
        try:
            summaries = pipeline.validate_batch(spark, settings, source=args.source, batch_id=applied.batch_id,
                                                applied=applied, run_id=args.run_id or f"{args.source}-{applied.batch_id}")
        finally:
            spark.stop()
        for summary in summaries:
            for failure in summary.failed():
                print(f"validate_tables.py: failed: {failure}", file=sys.stderr)
        return {"success": all(s.success for s in summaries), "summaries": [s.to_dict() for s in summaries]}

    return run_job("validate_tables.py", body, output=args.output, exit_code=lambda r: 0 if r["success"] else 1)


if __name__ == "__main__":
    sys.exit(main())
