"""spark-submit entry point: validate the tables a batch touched, apply each table's data-quality policy, and store
the results.

    spark-submit jobs/validate_tables.py --source demo --applied applied.json --run-id nightly-42 \\
        [--dq-policy public.orders=quarantine,default=fail] [--dag-id my_dag]

``--applied`` is the JSON that ``apply_changes.py --output`` wrote. Does what the ``cdclake_ingest`` DAG's
``validate_tables`` task does (:func:`cdclake.dq_gate.gate_batch`): runs the table and batch suites, stores every
outcome in ``cdclake_meta.dq_results``, the JSON reports and the Data Docs, then applies each table's policy
(``--dq-policy``, default ``CDCLAKE_DQ_POLICY``): ``fail`` fails the job, ``warn`` marks the table, ``quarantine``
takes the batch's changes back out of the table and holds them for ``cdclake dq release``.

Prints the compact report (``success``, ``tables`` with each table's status and failed expectations, ``summaries``)
as JSON; a readable account goes to stderr. Exit status: 0 when no table with the ``fail`` policy failed, 1 when one
did (stderr lists the failed expectations and the reports) or validation could not run, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from cdclake.jobkit import job_parser, run_job


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = job_parser("validate_tables.py", __doc__)
    parser.add_argument("--applied", type=Path, required=True, metavar="FILE",
                        help="ApplyResult JSON written by apply_changes.py --output")
    parser.add_argument("--run-id", help="name of the validation run (default: <source>-<batch id>)")
    parser.add_argument("--dq-policy", metavar="POLICY",
                        help="policy per table, e.g. 'public.orders=warn,default=fail' (default: $CDCLAKE_DQ_POLICY)")
    parser.add_argument("--dag-id", help="the Airflow DAG submitting the job, stored with the results")
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
    # The readable account of the validation is logged by cdclake.dq_gate; show it (and only cdclake's) on stderr.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("cdclake").setLevel(logging.INFO)

    def body() -> dict:
        from cdclake.dq_config import DqConfig
        from cdclake.dq_gate import ValidationFailedError, gate_batch
        from cdclake.pipeline import ApplyResult
        from cdclake.settings import LakeSettings
        from cdclake.spark import get_spark

        applied = ApplyResult.from_dict({"source": args.source, **args.applied_data})
        config = DqConfig.from_env(policy=args.dq_policy)
        settings = LakeSettings.from_env(args.lake)
        spark = get_spark(settings, app_name="cdclake-validate")
        try:
            report = gate_batch(spark, settings, source=args.source, applied=applied, config=config,
                                run_id=args.run_id or f"{args.source}-{applied.batch_id}", dag_id=args.dag_id)
        except ValidationFailedError as exc:
            print(f"validate_tables.py: {exc}", file=sys.stderr)
            return exc.report
        finally:
            spark.stop()
        return report

    return run_job("validate_tables.py", body, output=args.output, exit_code=lambda r: 0 if r["success"] else 1)


if __name__ == "__main__":
    sys.exit(main())
