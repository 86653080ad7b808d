"""Top-level ``$set``/``$unset`` patches of JSON documents, as Spark SQL expressions (no Python per row).

MongoDB sources (Huawei DRS) send an update as operators (``{"$set": {...}, "$unset": {...}}``) rather than the new
document, so the stored ``document`` column must be patched. Spark 3.5 has no JSON-object type, and ``from_json``
into ``map<string,string>`` returns a JSON string value *without* its quotes, so the text ``"1"`` and the number ``1``
would read back the same. :func:`doc_map_sql` avoids that: before parsing, every JSON string token gets a U+0001
marker after its opening quote (U+0001 cannot appear raw inside valid JSON), so a map value that starts with the
marker was a string and is re-encoded as one; any other value is raw JSON text (numbers, booleans, null, nested
objects and arrays, whose own markers, re-encoded by the parser as ``"\u0001``, are removed). The one thing this
cannot keep is a U+0001 character at the very start of a string nested inside an object or array value.

Composition (several patches of one key in one batch) is a fold over the key's changes in position order
(:func:`fold_sql`): a full image resets the state, a delete ends it, a patch either patches the full image
already in the state or is merged into the pending patch (later ``$set`` wins; ``$unset`` removes a pending
``$set`` and vice versa). A pending patch is applied to the stored document at apply time.
"""

from __future__ import annotations

PATCH_COLUMN = "document"
"""The JSON document column a record's ``patch`` applies to (MongoDB collections: ``_id`` + ``document``)."""
MARK = "\u0001"
_STRING_TOKEN = r'"([^"\\\\]*+(?:\\\\.[^"\\\\]*+)*+)"'
"""A JSON string token (as a Java regex inside a SQL string literal: backslashes doubled twice), in the form that
repeats a group once per escape, not per character (:data:`cdclake.formats.message._JSON_STRING`)."""
EMPTY_MAP = "map_from_arrays(array(), array())"
PATCH_STATE = "struct<kind:string,doc:string,setm:map<string,string>,unset:array<string>>"
"""Fold state: ``kind`` none | full | deleted | patch; ``doc`` for full; ``setm``/``unset`` for a pending patch."""


def json_string_sql(text: str) -> str:
    """SQL: a string value -> its JSON string literal text (quoted and escaped)."""
    return f"regexp_extract(to_json(array({text})), '^\\\\[(.*)\\\\]$', 1)"


def doc_map_sql(doc: str) -> str:
    """SQL: JSON object text -> ``map<string,string>`` of its top-level fields to their raw JSON value text."""
    marked = f"regexp_replace({doc}, '{_STRING_TOKEN}', '\"{MARK}$1\"')"
    parsed = f"from_json({marked}, 'map<string,string>', map('allowUnquotedControlChars', 'true'))"
    unmarked = f"transform_keys({parsed}, (k, v) -> substring(k, 2))"
    return (
        f"transform_values({unmarked}, (k, v) -> CASE WHEN v IS NULL THEN 'null' "
        f"WHEN startswith(v, '{MARK}') THEN {json_string_sql('substring(v, 2)')} "
        f"ELSE replace(v, '\"\\\\u0001', '\"') END)"
    )


def map_doc_sql(fields: str) -> str:
    """SQL: ``map<string,string>`` of field -> raw JSON value -> JSON object text."""
    return (f"concat('{{', array_join(transform(map_entries({fields}), "
            f"e -> concat({json_string_sql('e.key')}, ':', e.value)), ','), '}}')")


def patch_set_sql(patch: str) -> str:
    """SQL: the ``$set`` fields of a patch (JSON text) as a map (empty when absent)."""
    return f"coalesce({doc_map_sql(f'element_at({doc_map_sql(patch)}, {chr(39)}$set{chr(39)})')}, {EMPTY_MAP})"


def patch_unset_sql(patch: str) -> str:
    """SQL: the ``$unset`` field names of a patch (JSON text) as an array (empty when absent)."""
    unset = f"element_at({doc_map_sql(patch)}, '$unset')"
    return f"coalesce(map_keys({doc_map_sql(unset)}), cast(array() AS array<string>))"


def apply_sql(doc_fields: str, setm: str, unset: str) -> str:
    """SQL: document fields (a map) patched by ``$set`` fields (a map) and ``$unset`` names -> JSON text.

    Fields keep their order; ``$set`` replaces a field in place and appends new fields.
    """
    kept = f"map_filter({doc_fields}, (k, v) -> NOT array_contains({unset}, k))"
    updated = f"transform_values({kept}, (k, v) -> coalesce(element_at({setm}, k), v))"
    added = f"map_filter({setm}, (k, v) -> NOT array_contains(map_keys({doc_fields}), k))"
    return map_doc_sql(f"map_concat({updated}, {added})")


def fold_sql(changes: str) -> str:
    """SQL: an array of ``struct<op, document, patch>`` in position order -> the fold state (:data:`PATCH_STATE`)."""
    return f"aggregate({changes}, {_ZERO}, (s, c) -> {_step_sql('s', 'c')})"


def scan_sql(changes: str, passed: str) -> str:
    """SQL: an array of ``struct<op, document, patch, <passed>>`` in position order -> the fold state just after
    each element, in one pass; null for an element whose boolean field ``passed`` is true (the fold skips it)."""
    step, none = _step_sql("a.s", "c"), f"CAST(NULL AS {PATCH_STATE})"
    zero = f"named_struct('s', {_ZERO}, 'outs', CAST(array() AS array<{PATCH_STATE}>))"
    return (f"aggregate({changes}, {zero}, (a, c) -> IF(c.{passed}, "
            f"named_struct('s', a.s, 'outs', concat(a.outs, array({none}))), "
            # The new state, computed once, is bound to `n` (a one-element transform: SQL has no LET).
            f"element_at(transform(array({step}), n -> named_struct('s', n, 'outs', concat(a.outs, array(n)))), 1)),"
            f" a -> a.outs)")


def _step_sql(s: str, c: str) -> str:
    """SQL: the fold state after change ``c`` (``struct<op, document, patch>``), from state ``s``."""
    setm, unset = patch_set_sql(f"{c}.patch"), patch_unset_sql(f"{c}.patch")
    full = _state("'full'", f"{c}.document", EMPTY_MAP, "array()")
    deleted = _state("'deleted'", "NULL", EMPTY_MAP, "array()")
    patched = _state("'full'", apply_sql(doc_map_sql(f"{s}.doc"), setm, unset), EMPTY_MAP, "array()")
    merged_set = f"map_concat(map_filter({s}.setm, (k, v) -> NOT map_contains_key({setm}, k) " \
                 f"AND NOT array_contains({unset}, k)), {setm})"
    merged_unset = f"array_union(filter({s}.unset, k -> NOT map_contains_key({setm}, k)), {unset})"
    pending = _state("'patch'", "NULL", merged_set, merged_unset)
    return (f"CASE WHEN {c}.op = 'd' THEN {deleted} "
            f"WHEN {c}.patch IS NULL THEN {full} "
            f"WHEN {s}.kind = 'full' THEN {patched} "
            f"WHEN {s}.kind = 'deleted' THEN {s} "
            f"ELSE {pending} END")


def _state(kind: str, doc: str, setm: str, unset: str) -> str:
    return (f"cast(named_struct('kind', {kind}, 'doc', cast({doc} AS string), 'setm', {setm}, 'unset', {unset}) "
            f"AS {PATCH_STATE})")


_ZERO = _state("'none'", "NULL", EMPTY_MAP, "array()")
