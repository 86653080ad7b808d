"""Several ``cdclake`` CLI calls in one process, so they share one SparkSession (one JVM start instead of one each).

``python tests/support/cli_session.py calls.json`` runs each argument list of the JSON file through
:func:`cdclake.cli.main` in order, stopping at the first non-zero exit, and prints ``CLI-JSON [...]``: per call
``{"cli", "exit", "stdout", "stderr"}``. Tests call :func:`run_cli_session`. The CLI's own process contract (exit
codes, one JSON line, errors on stderr) is tested with real subprocess calls in ``tests/e2e/test_cli_apply.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

PREFIX = "CLI-JSON "


def run_cli_session(calls: list[list[str]], workdir: Path, *, timeout: float = 1200) -> list[dict[str, Any]]:
    """Run ``calls`` in one subprocess; the result of each call that ran (the last one failed if it is short)."""
    workdir.mkdir(parents=True, exist_ok=True)
    plan = workdir / "cli-calls.json"
    plan.write_text(json.dumps(calls))
    proc = subprocess.run([sys.executable, __file__, str(plan)], capture_output=True, text=True, timeout=timeout,
                          check=False)
    (workdir / "cli-calls.log").write_text(proc.stdout + proc.stderr)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(PREFIX)), None)
    assert proc.returncode == 0 and line, f"cli session exit {proc.returncode}:\n{proc.stderr[-4000:]}"
    return json.loads(line[len(PREFIX):])


def call_cli(args: list[str]) -> dict[str, Any]:
    """One ``cdclake`` CLI call in this process: ``{"cli", "exit", "stdout", "stderr"}``."""
    from cdclake.cli import main as cdclake

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cdclake(args)
    return {"cli": args, "exit": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def main(argv: list[str]) -> int:
    results = []
    for args in json.loads(Path(argv[0]).read_text()):
        results.append(call_cli(args))
        if results[-1]["exit"] != 0:
            break
    print(PREFIX + json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
