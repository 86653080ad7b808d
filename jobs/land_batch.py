"""spark-submit entry point: land input files, or every new file of an inbox, as one micro-batch.

    spark-submit jobs/land_batch.py --source demo --inbox lake/inbox
    python jobs/land_batch.py --source demo changes-001.jsonl changes-002.jsonl

Landing needs no Spark; the job is a spark-submit entry point so a deployment runs every stage the same way.
Prints the ``LandResult`` as JSON (``batch_id`` null when nothing new was found). Exit status: 0 on success, 1
when landing failed, 2 on bad arguments.
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
    from cdclake.landing import FRAMINGS

    parser = _Parser(prog="land_batch.py", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", help="lake root directory (default: $CDCLAKE_LAKE or ./lake)")
    parser.add_argument("--source", required=True, help="source name")
    parser.add_argument("--inbox", help="land every file of this directory or s3:// prefix not landed before")
    parser.add_argument("--framing", choices=FRAMINGS, default="auto", help="input framing (default: auto)")
    parser.add_argument("--output", type=Path, help="also write the result JSON to this file")
    parser.add_argument("inputs", nargs="*", metavar="INPUT", help="input files or s3:// objects")
    args = parser.parse_args(argv)
    if bool(args.inbox) == bool(args.inputs):
        parser.error("give either --inbox or INPUT files, not both or neither")
    if args.inbox and args.framing != "auto":
        parser.error("--framing applies to INPUT files; inbox files are always detected")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from cdclake import pipeline
    from cdclake.exceptions import CdclakeError, ConfigError
    from cdclake.settings import LakeSettings

    try:
        settings = LakeSettings.from_env(args.lake)
        if args.inbox:
            result = pipeline.land_inbox(settings, source=args.source, inbox=args.inbox)
        else:
            result = pipeline.land_inputs(settings, source=args.source, inputs=args.inputs, framing=args.framing)
    except ConfigError as exc:
        print(f"land_batch.py: error: {exc}", file=sys.stderr)
        return 2
    except CdclakeError as exc:
        print(f"land_batch.py: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    text = json.dumps(result.to_dict(), indent=2, sort_keys=True)
    if args.output:
        args.output.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
