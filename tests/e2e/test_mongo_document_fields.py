"""MongoDB collections with top-level document fields exposed as typed columns (``document_fields``).

The simulated collection (:func:`tests.support.format_streams.mongo_stream`: inserts, replaces that drop fields,
``$set``/``$unset`` patches, a delete and re-insert) is encoded as Huawei DRS MongoDB JSON, three batches. The first
two are applied with no fields configured, the third with them: fields configured on a table that has rows must
be filled from the stored documents (one document is not touched by the third batch).
Every exposed column is checked against the plain-Python replay of the collection's operations.
"""

from __future__ import annotations

import json
import uuid

from cdclake.apply_options import ApplyOptions
from cdclake.landing import InputFile, land_files
from cdclake.normalize import normalize_batch
from cdclake.pipeline import apply_batch
from cdclake.reader import dump_rows
from tests.support.format_streams import encode_drs_mongo, expected_documents, mongo_stream

FIELDS = (("sku", "string"), ("qty", "bigint"), ("price", "decimal(10,2)"), ("active", "boolean"),
          ("status", "string"), ("owner", "string"), ("dims", "string"), ("comment", "int"))


def test_document_fields_follow_the_folded_document(spark, session_lake) -> None:
    db = f"mdoc{uuid.uuid4().hex[:8]}"
    source = f"src-{db}"
    table_id = f"{db}.inventory"
    events = mongo_stream()
    phases = encode_drs_mongo(events, db=db)
    for number, lines in enumerate(phases):
        files = [InputFile(f"mem://{source}/phase-{number}.json", "\n".join(lines).encode("utf-8"))]
        batch_id, _, _, _ = land_files(session_lake, source=source, files=files)
        normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="drs")
        options = ApplyOptions(document_fields=FIELDS if number == 2 else ())
        apply_batch(spark, session_lake, source=source, batch_id=batch_id, options={table_id: options})

    expected = expected_documents(events, table_id)[table_id]
    rows = dump_rows(session_lake, table_id)
    assert [r["_id"] for r in rows] == [e["_id"] for e in expected]
    for row, want in zip(rows, expected):
        doc = want["document"]
        assert json.loads(row["document"]) == doc
        assert row["sku"] == doc.get("sku") and row["status"] == doc.get("status")
        assert row["qty"] == doc.get("qty") and row["active"] == doc.get("active")
        assert row["owner"] == doc.get("owner")
        assert (None if row["price"] is None else float(row["price"])) == doc.get("price")
        assert (None if row["dims"] is None else json.loads(row["dims"])) == doc.get("dims")
        # Text in an int column does not cast: the column is null, the document keeps the value.
        assert row["comment"] is None
    untouched_last = {e.oid for e in events} - {e.oid for e in events if e.phase == 2}
    assert any(r["sku"] is not None for r in rows if r["_id"] in untouched_last)  # filled, not re-applied
    properties = spark.sql(f"SHOW TBLPROPERTIES lake.{table_id}").collect()
    filled = {r.key: r.value for r in properties}["cdclake.document-fields"]
    assert filled.split(",") == [name for name, _ in FIELDS]
