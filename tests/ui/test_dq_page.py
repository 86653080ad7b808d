"""The Data Quality page in a real Airflow API server, seen by a real headless Chromium.

One module-scoped setup (it is slow on purpose-free machines, so everything shares it):

* a throw-away ``AIRFLOW_HOME`` with SimpleAuthManager, ``all_admins`` off and one test user whose password is
  written up front, so authentication is on;
* ``airflow api-server`` on a free localhost port, started first because it takes longest;
* one ``airflow dags test cdclake_ingest`` run over the demo's first micro-batch (``public.customers``,
  ``public.orders``), with a user suite that makes ``public.orders`` fail one expectation under the ``warn``
  policy while ``public.customers`` passes.

The oracle is the setup: which table passes, which fails, and the failing expectation are what the user suite
and the policy say, not what the code under test reports.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import pytest

from cdclake import airflow_home
from cdclake.demo.generator import generate, write_batches
from cdclake.demo.run import deliver, run_dag
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
USER, PASSWORD = "dq-tester", "dq-tester-password"
FAILING = "expect_column_values_to_be_between"
LOGICAL_DATE = datetime(2026, 3, 1, tzinfo=timezone.utc)
SERVER_START_TIMEOUT = 240


def _http(url: str, *, token: str | None = None, data: dict[str, Any] | None = None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"} if data is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """API server with the plugin, and one DAG run with a passing and a failing table."""
    root = tmp_path_factory.mktemp("dq_ui")
    home, lake, suites = root / "airflow", root / "lake", root / "suites"
    suites.mkdir()
    stream = generate(customers=6, orders=6, stream_changes=30, batches=2)
    # The first micro-batch is the snapshot: every order above the third-lowest id breaks the user suite.
    order_ids = sorted(c.key["order_id"] for c in stream.changes if c.table == "orders" and c.op == "snapshot")
    (suites / "public.orders.yaml").write_text(
        "expectations:\n"
        f"  - type: {FAILING}\n"
        f"    kwargs: {{column: order_id, max_value: {order_ids[2]}}}\n"
        "    notes: deliberately failing in the UI test\n"
    )
    home.mkdir()
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({USER: PASSWORD}))
    env = airflow_home.prepare(home, {
        **os.environ,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "CDCLAKE_LAKE": str(lake),
        "CDCLAKE_INBOX": str(lake / "inbox"),
        "CDCLAKE_DQ_SUITES": str(suites),
        "CDCLAKE_SPARK_MASTER": "local[2]",
        "CDCLAKE_SHUFFLE_PARTITIONS": "2",
        "CDCLAKE_DRIVER_MEMORY": "1g",
    })
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server_log = (root / "api-server.log").open("w")
    server = subprocess.Popen([*airflow_home.airflow_command(), "api-server", "--host", "127.0.0.1", "--port",
                               str(port), "--workers", "1"], env=env, stdout=server_log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        first = write_batches(stream, lake / "stream")[0]
        deliver(first, lake / "inbox")
        conf = {"source": "demo", "format": "debezium", "lake": str(lake), "inbox": str(lake / "inbox"),
                "keys": [], "dq_policy": "public.orders=warn,default=fail"}
        run_dag(env, LOGICAL_DATE, conf, root / "dag-run.log")
        validated = airflow_home.run_xcom(env, "cdclake_ingest", LOGICAL_DATE, "validate_tables")

        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            assert server.poll() is None, f"api-server exited:\n{(root / 'api-server.log').read_text()[-4000:]}"
            try:
                status, _ = _http(f"{base}/api/v2/monitor/health")
                if status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "api-server did not come up in time"
            time.sleep(2)
        status, body = _http(f"{base}/auth/token", data={"username": USER, "password": PASSWORD})
        assert status == 201, body
        yield {"base": base, "token": json.loads(body)["access_token"], "validated": validated, "lake": lake,
               "over_limit": order_ids[3:]}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        server_log.close()


def test_dag_run_produced_a_passing_and_a_warned_table(stack: dict[str, Any]) -> None:
    tables = stack["validated"]["tables"]
    assert tables["public.customers"]["status"] == "passed"
    assert tables["public.orders"]["status"] == "warned"
    assert any(FAILING in line for line in tables["public.orders"]["failed"])


@pytest.mark.parametrize("path", ["/cdclake-dq/", "/cdclake-dq/api/tables", "/cdclake-dq/docs/index.html",
                                  "/cdclake-dq/run?run_id=x"])
def test_unauthenticated_requests_are_refused(stack: dict[str, Any], path: str) -> None:
    status, body = _http(stack["base"] + path)
    assert status in (401, 403), (status, body[:300])
    assert "public.orders" not in body


def test_authenticated_json_and_plugin_registration(stack: dict[str, Any]) -> None:
    status, body = _http(stack["base"] + "/cdclake-dq/api/tables", token=stack["token"])
    assert status == 200, body
    tables = json.loads(body)
    assert tables["public.customers"]["status"] == "passed"
    assert tables["public.orders"]["status"] == "warned"
    assert tables["public.orders"]["failed"] == [FAILING]

    status, body = _http(stack["base"] + "/api/v2/plugins", token=stack["token"])
    assert status == 200, body
    (plugin,) = [p for p in json.loads(body)["plugins"] if p["name"] == "cdclake_dq"]
    assert [a["url_prefix"] for a in plugin["fastapi_apps"]] == ["/cdclake-dq"]
    assert {(v["name"], v["destination"]) for v in plugin["external_views"]} == {
        ("Data Quality", "nav"), ("Data Quality", "dag_run"), ("Data Quality", "task_instance")}


def test_data_quality_page_in_chromium(stack: dict[str, Any]) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    profile = Path(stack["lake"]).parent / "chromium-profile"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        base = stack["base"]
        # Without the session cookie the page is refused in the browser too.
        driver.get(f"{base}/cdclake-dq/")
        assert "public.orders" not in driver.page_source
        # Log in the way Airflow's UI does: its JWT in the `_token` cookie.
        driver.add_cookie({"name": "_token", "value": stack["token"], "path": "/"})

        driver.get(f"{base}/cdclake-dq/")
        wait = WebDriverWait(driver, 30)
        wait.until(ec.presence_of_element_located((By.ID, "tables")))
        rows = {row.get_attribute("data-table"): row.text
                for row in driver.find_elements(By.CSS_SELECTOR, "#tables tr[data-table]")}
        assert set(rows) == {"public.customers", "public.orders"}
        assert "PASSED" in rows["public.customers"]
        assert "WARNED" in rows["public.orders"] and FAILING in rows["public.orders"]
        assert driver.find_elements(By.CSS_SELECTOR, "#tables svg.trend rect")
        driver.save_screenshot(str(ARTIFACTS / "dq_overview.png"))

        driver.find_element(By.CSS_SELECTOR, "tr[data-table='public.orders'] td:nth-child(3) a").click()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "section.table-run")))
        section = driver.find_element(By.CSS_SELECTOR, "section.table-run[data-table='public.orders']")
        assert "WARNED" in section.text
        failed = section.find_element(By.CSS_SELECTOR, "tr.expectation")
        assert FAILING in failed.text and "order_id" in failed.text
        # Sample rows: exactly the orders over the user suite's limit.
        samples = failed.find_element(By.CSS_SELECTOR, "table.samples")
        header = [th.text for th in samples.find_elements(By.TAG_NAME, "th")]
        column = header.index("order_id")
        shown = [tr.find_elements(By.TAG_NAME, "td")[column].text
                 for tr in samples.find_elements(By.TAG_NAME, "tr")[1:]]
        assert sorted(shown) == sorted(str(order_id) for order_id in stack["over_limit"])
        docs = section.find_element(By.PARTIAL_LINK_TEXT, "Data Docs")
        driver.save_screenshot(str(ARTIFACTS / "dq_run.png"))
        docs.click()
        wait.until(lambda d: "cdclake.public.orders" in d.page_source or "orders" in d.title.lower())
        assert "/cdclake-dq/docs/" in driver.current_url

        # The DAG run's "Data Quality" tab in Airflow's UI opens that run's report.
        run_id = stack["validated"]["summaries"][0]["run_id"]
        driver.get(f"{base}/dags/cdclake_ingest/runs/{quote(run_id, safe='')}/plugin/data-quality-run")
        wait.until(ec.presence_of_element_located((By.TAG_NAME, "iframe")))
        driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "section.table-run")))
        assert {s.get_attribute("data-table") for s in driver.find_elements(By.CSS_SELECTOR, "section.table-run")} \
            == {"public.customers", "public.orders"}
        assert run_id in driver.find_element(By.TAG_NAME, "h1").text
        driver.switch_to.default_content()
        time.sleep(1)
        driver.save_screenshot(str(ARTIFACTS / "dq_dag_run_tab.png"))

        # The page inside Airflow's own UI, under its navigation entry.
        driver.get(f"{base}/plugin/data-quality")
        wait.until(ec.presence_of_element_located((By.TAG_NAME, "iframe")))
        driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))
        wait.until(ec.presence_of_element_located((By.ID, "tables")))
        assert "public.orders" in driver.page_source
        driver.switch_to.default_content()
        time.sleep(1)
        driver.save_screenshot(str(ARTIFACTS / "dq_in_airflow_ui.png"))
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_cli_reads_the_same_results(stack: dict[str, Any]) -> None:
    proc = subprocess.run([sys.executable, "-m", "cdclake.cli", "dq", "results", "--lake", str(stack["lake"]),
                           "--table", "public.orders"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert {r["status"] for r in rows} == {"warned"}
    (failed,) = [r for r in rows if not r["success"]]
    assert (failed["expectation"], failed["column_name"], failed["policy"]) == (FAILING, "order_id", "warn")
    assert sorted(r["order_id"] for r in failed["sample_rows"]) == sorted(stack["over_limit"])
    held = subprocess.run([sys.executable, "-m", "cdclake.cli", "dq", "held", "--lake", str(stack["lake"])],
                          capture_output=True, text=True, timeout=120, check=False)
    assert (held.returncode, held.stdout) == (0, "")
