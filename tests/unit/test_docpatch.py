"""``$set``/``$unset`` document patching in Spark SQL against a plain-Python oracle.

Many random documents and change sequences go through Spark in one DataFrame; the oracle replays them with dicts.
"""

from __future__ import annotations

import json
import random
from typing import Any

from pyspark.sql import functions as F

from cdclake import docpatch

STRINGS = ["", "a", '"quoted"', "back\\slash", "uni é ñ 华为", "tab\there", "new\nline", "{not json}", "$set",
           "raw \u0001 inside"]


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 2 else 5)
    if kind == 0:
        return rng.choice(STRINGS)
    if kind == 1:
        return rng.randint(-10**12, 10**12)
    if kind == 2:
        return rng.choice([1.5, -0.25, 1e21])
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return str(rng.randint(0, 9))  # the text "1" must stay a string, not become the number 1
    if kind == 5:
        return [value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(["x", "y", "k\"q", "é"]): value(rng, depth + 1) for _ in range(rng.randrange(3))}


FIELDS = ["a", "b", "c", "d", "e\"f", "g.h"]


def document(rng: random.Random, oid: str) -> dict[str, Any]:
    doc = {"_id": oid}
    for name in rng.sample(FIELDS, rng.randrange(len(FIELDS))):
        doc[name] = value(rng)
    return doc


def patch(rng: random.Random) -> dict[str, Any]:
    names = rng.sample(FIELDS, rng.randrange(1, 4))
    split = rng.randrange(len(names) + 1)
    out: dict[str, Any] = {}
    if names[:split]:
        out["$set"] = {n: value(rng) for n in names[:split]}
    if names[split:]:
        out["$unset"] = {n: True for n in names[split:]}
    return out


def oracle(stored: dict[str, Any] | None, changes: list[tuple[str, Any]], oid: str) -> dict[str, Any] | None:
    doc = None if stored is None else dict(stored)
    deleted = False
    for op, payload in changes:
        if op == "d":
            doc, deleted = None, True
        elif op == "full":
            doc, deleted = dict(payload), False
        elif not deleted:
            doc = dict(doc) if doc is not None else {"_id": oid}
            for name in payload.get("$unset", {}):
                doc.pop(name, None)
            for name, v in payload.get("$set", {}).items():
                doc[name] = v
    return doc


def random_changes(rng: random.Random, oid: str, most: int) -> list[tuple[str, Any]]:
    """1 to ``most - 1`` changes: deletes, full documents (``full``) and patches (``u``)."""
    changes: list[tuple[str, Any]] = []
    for _ in range(rng.randrange(1, most)):
        r = rng.random()
        changes.append(("d", None) if r < 0.1 else ("full", document(rng, oid)) if r < 0.35 else ("u", patch(rng)))
    return changes


def stored_text(stored: dict[str, Any] | None) -> str | None:
    return json.dumps(stored, ensure_ascii=False) if stored is not None else None


def change_row(op: str, payload: Any) -> tuple[str, str | None, str | None]:
    """(op, document, patch) as the fold reads a change."""
    text = json.dumps(payload, ensure_ascii=False)
    return "d" if op == "d" else "u", text if op == "full" else None, text if op == "u" else None


def state_document(state: str) -> Any:
    """The document a fold state gives: its full image, its patch applied to ``base``, or ``stored``."""
    kind = F.col(f"{state}.kind")
    return (F.when(kind == "full", F.col(f"{state}.doc"))
            .when(kind == "patch", F.expr(docpatch.apply_sql(docpatch.doc_map_sql("base"), f"{state}.setm",
                                                             f"{state}.unset")))
            .when(kind == "none", F.col("stored")).alias("doc"))


def test_fold_and_apply_match_the_oracle(spark):
    rng = random.Random(7)
    cases = []
    for i in range(300):
        oid = f"{i:024x}"
        cases.append((oid, document(rng, oid) if rng.random() < 0.7 else None, random_changes(rng, oid, 5)))
    rows = [(oid, stored_text(stored), [change_row(op, p) for op, p in changes]) for oid, stored, changes in cases]
    df = spark.createDataFrame(rows, "oid string, stored string, "
                                     "changes array<struct<op:string,document:string,patch:string>>")
    state = df.withColumn("s", F.expr(docpatch.fold_sql("changes"))).withColumn(
        "base", F.coalesce("stored", F.to_json(F.struct(F.col("oid").alias("_id")))))
    result = state.select("oid", F.col("s.kind").alias("kind"), state_document("s")).collect()
    by_oid = {r.oid: r for r in result}
    for oid, stored, changes in cases:
        expected = oracle(stored, changes, oid)
        got = by_oid[oid]
        actual = None if got.kind == "deleted" else json.loads(got.doc)
        # Field order is not compared: a field unset and set again within one batch keeps its stored place.
        assert actual == expected, (oid, stored, changes, got)


def test_scan_gives_the_document_after_each_change_and_passes_over_skipped_ones(spark):
    rng = random.Random(11)
    cases = []
    for i in range(200):
        oid = f"{i:024x}"
        changes = [(op, p, rng.random() < 0.2) for op, p in random_changes(rng, oid, 8)]
        cases.append((oid, document(rng, oid) if rng.random() < 0.7 else None, changes))
    rows = [(oid, stored_text(stored), [(*change_row(op, p), passed) for op, p, passed in changes])
            for oid, stored, changes in cases]
    df = spark.createDataFrame(rows, "oid string, stored string, "
                                     "changes array<struct<op:string,document:string,patch:string,passed:boolean>>")
    scanned = df.withColumn("states", F.expr(docpatch.scan_sql("changes", "passed"))).withColumn(
        "base", F.coalesce("stored", F.to_json(F.struct(F.col("oid").alias("_id")))))
    result = scanned.select("oid", F.posexplode("states").alias("i", "s"), "base", "stored").select(
        "oid", "i", F.col("s.kind").alias("kind"), state_document("s")).collect()
    got = {(r.oid, r.i): r for r in result}
    assert len(got) == sum(len(changes) for _, _, changes in cases)
    for oid, stored, changes in cases:
        for i, (_, _, passed) in enumerate(changes):
            state = got[(oid, i)]
            if passed:
                assert state.kind is None, (oid, i, state)
                continue
            folded = [(op, p) for op, p, skip in changes[: i + 1] if not skip]
            expected = oracle(stored, folded, oid)
            actual = None if state.kind == "deleted" else json.loads(state.doc)
            assert actual == expected, (oid, i, stored, changes, state)


def test_round_trip_keeps_every_value_type(spark):
    docs = [{"s": "1", "n": 1, "f": 1.5, "b": False, "z": None, "nested": {"s": "x\"y", "a": ["1", 1, {"k": "é"}]},
             "empty": {}, "list": []}]
    df = spark.createDataFrame([(json.dumps(d, ensure_ascii=False),) for d in docs], "doc string")
    (row,) = df.select(F.expr(docpatch.map_doc_sql(docpatch.doc_map_sql("doc"))).alias("out")).collect()
    assert json.loads(row.out) == docs[0]
