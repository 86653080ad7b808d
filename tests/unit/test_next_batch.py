"""A scheduled run resumes a landed-but-unapplied batch before landing anything new."""

from __future__ import annotations

import json
from pathlib import Path

from cdclake import pipeline
from cdclake.settings import LakeSettings


def _message(n: int) -> str:
    return json.dumps({"op": "c", "after": {"id": n}, "source": {"table": "t", "db": "d", "lsn": n}}) + "\n"


def test_next_batch_resumes_unapplied_batch_then_lands_new_files(tmp_path: Path) -> None:
    settings = LakeSettings.from_env(tmp_path / "lake", env={})
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "a.jsonl").write_text(_message(1))

    first = pipeline.next_batch(settings, source="s", inbox=str(inbox))
    assert (first.batch_id, first.created) == ("00000001", True)

    # The run failed after landing; a re-run finds nothing new in the inbox but must finish batch 1.
    (inbox / "b.jsonl").write_text(_message(2))
    again = pipeline.next_batch(settings, source="s", inbox=str(inbox))
    assert (again.batch_id, again.created, again.message_count) == ("00000001", False, 1)

    marker = settings.staging_root / "s" / "00000001" / "_applied.json"
    marker.parent.mkdir(parents=True)
    marker.write_text("{}")
    assert pipeline.is_applied(settings, "s", "00000001")
    nxt = pipeline.next_batch(settings, source="s", inbox=str(inbox))
    assert (nxt.batch_id, nxt.created, nxt.message_count) == ("00000002", True, 1)


def test_next_batch_with_empty_or_missing_inbox_is_nothing(tmp_path: Path) -> None:
    settings = LakeSettings.from_env(tmp_path / "lake", env={})
    assert pipeline.next_batch(settings, source="s", inbox=str(tmp_path / "missing")).batch_id is None
    (tmp_path / "empty").mkdir()
    assert pipeline.next_batch(settings, source="s", inbox=str(tmp_path / "empty")).batch_id is None
