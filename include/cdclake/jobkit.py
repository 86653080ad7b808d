"""What every spark-submit entry point in ``jobs/`` shares: its argument parser and its run/exit protocol.

Exit status: 0 on success, 1 when the stage failed (a :class:`~cdclake.exceptions.CdclakeError`), 2 on bad
arguments or configuration (a one-line error on stderr). The result is printed as JSON and, with ``--output``,
also written to a file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn


class JobArgumentParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def job_parser(prog: str, doc: str | None) -> JobArgumentParser:
    """A job's parser with the options every job has: ``--lake``, ``--source`` and ``--output``."""
    parser = JobArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", help="lake root directory (default: $CDCLAKE_LAKE or ./lake)")
    parser.add_argument("--source", required=True, help="source name")
    parser.add_argument("--output", type=Path, help="also write the result JSON to this file")
    return parser


def run_job(prog: str, body: Callable[[], dict[str, Any]], *, output: Path | None,
            exit_code: Callable[[dict[str, Any]], int] = lambda _: 0) -> int:
    """Run a job's body and report its result (see the module docstring).

    Args:
        prog: The job's name, for messages.
        body: Does the work; returns the JSON-able result.
        output: Where to write the result too, or None.
        exit_code: The exit status for a result that was produced (e.g. 1 for failed validation).
    """
    from cdclake.exceptions import CdclakeError, ConfigError

    try:
        result = body()
    except ConfigError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except CdclakeError as exc:
        print(f"{prog}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    text = json.dumps(result, indent=2, sort_keys=True)
    if output:
        output.write_text(text + "\n")
    print(text)
    return exit_code(result)
