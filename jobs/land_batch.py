"""spark-submit entry point: land input files, or every new file of an inbox, as one micro-batch.

    spark-submit jobs/land_batch.py --source demo --inbox lake/inbox
    python jobs/land_batch.py --source demo changes-001.jsonl changes-002.jsonl

Landing needs no Spark; the job is a spark-submit entry point so a deployment runs every stage the same way.
Prints the ``LandResult`` as JSON (``batch_id`` null when nothing new was found). Exit status: 0 on success, 1
when landing failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import sys

from cdclake.jobkit import job_parser, run_job


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from cdclake.landing import FRAMINGS

    parser = job_parser("land_batch.py", __doc__)
    parser.add_argument("--inbox", help="land every file of this directory or s3:// prefix not landed before")
    parser.add_argument("--framing", choices=FRAMINGS, default="auto", help="input framing (default: auto)")
    parser.add_argument("inputs", nargs="*", metavar="INPUT", help="input files or s3:// objects")
    args = parser.parse_args(argv)
    if bool(args.inbox) == bool(args.inputs):
        parser.error("give either --inbox or INPUT files, not both or neither")
    if args.inbox and args.framing != "auto":
        parser.error("--framing applies to INPUT files; inbox files are always detected")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> dict:
        from cdclake import pipeline
        from cdclake.settings import LakeSettings

        settings = LakeSettings.from_env(args.lake)
        if args.inbox:
            return pipeline.land_inbox(settings, source=args.source, inbox=args.inbox).to_dict()
        return pipeline.land_inputs(settings, source=args.source, inputs=args.inputs, framing=args.framing).to_dict()

    return run_job("land_batch.py", body, output=args.output)


if __name__ == "__main__":
    sys.exit(main())
