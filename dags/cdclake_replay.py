"""
### cdclake_replay: an operator's recovery runs for one source (manual only)

Trigger it with the form; every field is explained there. Modes:

- **replay**: re-normalize and re-apply the selected landed batches (by batch-id range and/or landing-time
  range), optionally only some tables. Applying is idempotent by source position, so replaying any batch, in any
  order, never makes a table older; use it after a normalizer fix or to rebuild a table that was dropped.
- **quarantine-replay**: re-run the source's quarantined messages (optionally those whose reason contains
  `reason`) through the current code as a new batch (`cdclake.pipeline.replay_quarantine`); what fails again is
  quarantined again with its current reason. With `ddl_policy` evolve (or ignore) and reason `ddl_policy=fail`
  it releases the tables a DDL statement stopped under `ddl_policy: fail`, applying the held statement and the
  changes held behind it.
- **resnapshot**: cdclake cannot make a database re-snapshot; the run fails with the steps for the source (e.g. a
  Debezium `execute-snapshot` signal). The new snapshot then arrives as ordinary batches of the ingestion DAG.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task


def _source_names() -> list[str]:
    from cdclake.config import read_sources

    return sorted(read_sources()[0])  # the valid sources; cdclake_sources.py shows each invalid file's error


_SOURCES = _source_names()


@dag(
    dag_id="cdclake_replay",
    schedule=None,
    start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["cdclake", "recovery"],
    default_args={"owner": "cdclake", "retries": 1, "retry_delay": timedelta(seconds=30)},
    params={
        "source": Param(_SOURCES[0] if _SOURCES else "", type="string", title="Source",
                        description="The source to recover: the name of its config file in include/sources.",
                        **({"enum": _SOURCES} if _SOURCES else {})),
        "mode": Param("replay", type="string", enum=["replay", "resnapshot", "quarantine-replay"], title="Mode",
                      description="replay: re-normalize and re-apply the selected batches; quarantine-replay: re-run "
                                  "quarantined messages through the current code; resnapshot: explains how to make "
                                  "the source send a new snapshot."),
        "tables": Param([], type="array", items={"type": "string"}, title="Tables",
                        description="replay only: namespace.table globs to apply (e.g. public.orders); empty means "
                                    "every table the source applies."),
        "batch_from": Param("", type="string", title="First batch",
                            description="replay only: first batch id of the range (e.g. 00000003); empty: from the "
                                        "first batch."),
        "batch_to": Param("", type="string", title="Last batch",
                          description="replay only: last batch id of the range; empty: to the last batch."),
        "time_from": Param("", type="string", title="Landed from",
                           description="replay only: ISO-8601 time; batches landed at or after it "
                                       "(e.g. 2026-01-31T00:00:00+00:00)."),
        "time_to": Param("", type="string", title="Landed until",
                         description="replay only: ISO-8601 time; batches landed at or before it."),
        "reason": Param("", type="string", title="Quarantine reason",
                        description="quarantine-replay only: replay messages whose reason contains this text "
                                    "(case-insensitive); empty: all of the source's quarantined messages."),
        "ddl_policy": Param("", type="string", enum=["", "evolve", "ignore", "fail"], title="DDL policy",
                            description="quarantine-replay only: the DDL policy the replayed messages are normalized "
                                        "under; empty: the source config's. To release a table a DDL statement "
                                        "stopped (reason ddl_policy=fail), replay with evolve or ignore."),
    },
)
def cdclake_replay() -> None:
    @task(task_id="run_replay")
    def run_replay() -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException

        from cdclake import source_tasks
        from cdclake.exceptions import ConfigError

        try:
            return source_tasks.replay(dict(get_current_context()["params"]))
        except ConfigError as exc:
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc

    run_replay()


cdclake_replay()
