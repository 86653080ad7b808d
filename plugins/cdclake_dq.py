"""Airflow plugin: the cdclake **Data Quality** pages in the Airflow UI (wiring only; see ``cdclake.dq_web``).

* ``fastapi_apps``: the pages, mounted at ``/cdclake-dq`` in the API server, behind Airflow's authentication
  (every route depends on ``requires_access_dag("GET", RUN)``: no token or cookie, no page).
* ``external_views``: a top-level **Data Quality** navigation entry, and a **Data Quality** tab on every DAG run
  and task instance that opens that run's report.

The lake is read from the API server's environment (``CDCLAKE_LAKE`` and the other ``CDCLAKE_*`` variables).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.plugins_manager import AirflowPlugin

log = logging.getLogger(__name__)

URL_PREFIX = "/cdclake-dq"
RUN_REPORT_HREF = "cdclake-dq/run?dag_id={DAG_ID}&run_id={RUN_ID}"
"""Relative to the UI's base URL; the UI fills in {DAG_ID} and {RUN_ID} for DAG-run and task-instance views."""


def _access_dependencies() -> list[Any]:
    """Airflow's own auth dependency for the app; if it cannot be loaded, one that refuses every request."""
    from fastapi import Depends, HTTPException

    try:
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
        from airflow.api_fastapi.core_api.security import requires_access_dag
    except Exception:  # noqa: BLE001 - never serve the pages unauthenticated
        log.exception("cdclake_dq: Airflow's FastAPI security is unavailable; the Data Quality pages refuse access")

        def refuse() -> None:
            raise HTTPException(status_code=401, detail="Airflow authentication is unavailable")

        return [Depends(refuse)]
    return [Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.RUN))]


def _fastapi_apps() -> list[dict[str, Any]]:
    try:
        from cdclake.dq_web import create_app
    except ImportError:
        log.exception("cdclake_dq: the cdclake package is not importable (is <repo>/include on PYTHONPATH?)")
        return []
    return [{"app": create_app(dependencies=_access_dependencies()), "url_prefix": URL_PREFIX,
             "name": "cdclake Data Quality"}]


class CdclakeDataQualityPlugin(AirflowPlugin):
    """The Data Quality pages and their navigation entries."""

    name = "cdclake_dq"
    fastapi_apps = _fastapi_apps()
    external_views = [
        {"name": "Data Quality", "href": "cdclake-dq/", "destination": "nav", "url_route": "data-quality",
         "nav_top_level": True},
        {"name": "Data Quality", "href": RUN_REPORT_HREF, "destination": "dag_run", "url_route": "data-quality-run"},
        {"name": "Data Quality", "href": RUN_REPORT_HREF, "destination": "task_instance",
         "url_route": "data-quality-task"},
    ]
