"""The demo: a simulated PostgreSQL shop database, its Debezium change stream, and the tables it should produce."""

from __future__ import annotations

from cdclake.demo.generator import DemoStream, LogicalChange, generate, write_batches
from cdclake.demo.oracle import expected_tables

__all__ = ["DemoStream", "LogicalChange", "expected_tables", "generate", "write_batches"]
