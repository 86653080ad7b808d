"""Where the format documents live for the tests.

The five documents of ``../shared/seeds`` (Debezium PostgreSQL and SQL Server, dtle, Huawei DRS, Tencent CKafka)
are copied verbatim into ``tests/fixtures/seeds`` so the suite does not depend on where the repository is
checked out. Their JSON examples are fixtures: the seed tests parse every one of them.
"""

from __future__ import annotations

from pathlib import Path

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"
