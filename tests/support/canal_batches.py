"""Small canal batches for in-process tests: flat messages of one ``<database>.items`` table, landed as one JSON
Lines file per batch."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from cdclake.apply_options import ApplyOptions
from cdclake.landing import InputFile, land_files
from cdclake.settings import LakeSettings

TYPES = {"id": ("int", 4), "name": ("varchar(20)", 12)}
"""Column -> (``mysqlType``, ``sqlType``) of the table; ``id`` is its key."""


def canal(database: str, kind: str, rows: Sequence[Mapping[str, str]], position: int,
          old: Sequence[Mapping[str, str]] | None = None,
          types: Mapping[str, tuple[str, int]] = TYPES) -> dict[str, object]:
    """A canal flat message whose ``es``, ``id`` and ``ts`` are all ``position``."""
    return {"data": list(rows), "database": database, "es": position, "id": position, "isDdl": False,
            "mysqlType": {c: t for c, (t, _) in types.items()}, "old": list(old) if old is not None else None,
            "pkNames": ["id"], "sql": "", "sqlType": {c: code for c, (_, code) in types.items()}, "table": "items",
            "ts": position, "type": kind}


def land_messages(settings: LakeSettings, source: str, name: str, messages: Sequence[Mapping[str, object]]) -> str:
    """Land ``messages`` as the source's next batch (one file, ``name``); returns the batch id."""
    text = "".join(json.dumps(m) + "\n" for m in messages).encode("utf-8")
    batch_id, _, _, _ = land_files(settings, source=source, files=[InputFile(f"mem://{source}/{name}.jsonl", text)])
    return batch_id


def apply_messages(spark: Any, settings: LakeSettings, source: str, name: str,
                   messages: Sequence[Mapping[str, object]], options: ApplyOptions | None = None,
                   fmt: str = "canal", keys: Sequence[str] = ()) -> dict[str, Any]:
    """Land ``messages`` as the source's next batch, normalize it as ``fmt`` (nothing may be quarantined; ``keys``
    declared as ``--key`` declares them) and apply it; the apply counts per table."""
    from cdclake.keys import KeySpec
    from cdclake.normalize import normalize_batch
    from cdclake.pipeline import apply_batch

    batch_id = land_messages(settings, source, name, messages)
    normalized = normalize_batch(spark, settings, source=source, batch_id=batch_id, fmt=fmt,
                                 keys=KeySpec.parse(keys))
    assert normalized.quarantined == 0, normalized
    return apply_batch(spark, settings, source=source, batch_id=batch_id, default=options or ApplyOptions()).tables
