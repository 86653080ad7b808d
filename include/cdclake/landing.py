"""Landing: input files -> an immutable micro-batch in the raw zone, with a manifest.

Inputs are UTF-8 text (or UTF-16 with its byte-order mark), optionally gzip- or zstd-compressed (told by the
content, not the name); a message holding bytes that are not UTF-8 is kept as a broken message saying where.

Input framings (``framing="auto"`` picks one per file from its first non-blank line):

- ``jsonl``: one message value per line (a line of concatenated documents is one message per document).
- ``kcat``: ``kcat -C -J`` envelopes, one per line: ``topic``, ``partition``, ``offset``, ``ts``, ``headers``
  (a flat ``[name, value, …]`` list, or an object), and ``key``/``payload`` as the raw message strings (null for a
  null key or a tombstone). A payload of several JSON documents is a broken message (a record is one message).
- ``console``: ``kafka-console-consumer`` output with its ``print.*`` properties and the default tab separator:
  ``CreateTime:<ms>``, ``Partition:<n>``, ``Offset:<n>`` (and ``NO_TIMESTAMP``, ``LogAppendTime:``,
  ``LeaderEpoch:``, ``Delivery:``, ``NO_HEADERS``), then the headers (``name:value,...``), the key and the value,
  a tab after each; ``null`` is a null key or value. A value of several JSON documents is a broken message, as a
  kcat payload's is. A file is read so when its first line starts with such a field or is a JSON key, a tab and a
  value (``print.key=true``).
- ``json``: concatenated or pretty-printed JSON documents (as in the format documents), or one JSON array of
  messages. A document that does not parse is kept as a broken message (with its line and the parser's reason),
  and reading resumes at the next line that starts with ``{``.

Raw zone layout, per source (``<raw root>/<source>/``)::

    batches/<batch id>/part-<file index>.jsonl   one raw record per message (see RAW_FIELDS)
    manifests/<batch id>.json                    the batch exists iff its manifest exists (the commit point)
    claims/<batch id>                            batch ids are claimed once (put-if-absent) before writing
    landed/<sha256>.json                         content hash of a landed input -> its batch (idempotency)

Batch ids are zero-padded sequence numbers per source, so they sort in landing order.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from cdclake import __version__
from cdclake.exceptions import ConfigError, InputError, StorageError
from cdclake.settings import LakeSettings
from cdclake.storage import ObjectStore, open_store

log = logging.getLogger(__name__)

FRAMINGS = ("auto", "jsonl", "kcat", "console", "json")
BATCH_ID_WIDTH = 8
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_RESYNC = re.compile(r"^\ufeff*[{\[]", re.MULTILINE)
_SOURCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
"""A source name as a directory of the raw zone and staging: no path separator, not ``.`` or ``..``. Source
files' names are stricter (:data:`cdclake.config.SOURCE_NAME`)."""

RAW_FIELDS = (
    "input", "file_index", "index", "line", "byte_offset", "framing",
    "topic", "partition", "offset", "timestamp", "headers", "key", "value", "error",
)
"""Fields of a raw record: where the message came from (input URI, the file's index in the batch, the message's
index in the file, 1-based line, byte offset, framing), Kafka coordinates when known (topic, partition, offset,
timestamp ms, headers as an object), the message ``key`` and ``value`` as their raw strings (null for none), and
``error`` when the message could not even be framed (it is quarantined by normalization)."""


@dataclass(frozen=True)
class InputFile:
    """One input to land: its location and content."""

    uri: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def check_source_name(source: str) -> str:
    """``source`` when it can name the source's directories in the lake.

    Raises:
        ConfigError: It holds a path separator, starts with a dot or another character outside letters, digits,
            ``_``, ``.`` and ``-``, or is over 100 characters long.
    """
    if not _SOURCE.match(source):
        raise ConfigError(f"source name {source!r}: use letters, digits, '_', '.' and '-', starting with a letter or "
                          "a digit, at most 100 characters (it names the source's directories in the lake)")
    return source


def raw_store(settings: LakeSettings, source: str) -> ObjectStore:
    """The raw zone of one source (:func:`check_source_name`)."""
    check_source_name(source)
    return open_store(f"{settings.raw_root.rstrip('/')}/{source}", s3_endpoint=settings.s3_endpoint)


def resolve_inputs(paths: Sequence[str], *, s3_endpoint: str | None = None) -> list[InputFile]:
    """Read input files: file paths, directories (every file below, sorted) or ``s3://`` objects/prefixes.

    Raises:
        InputError: A path that does not exist or cannot be read, or inputs that hold no file at all.
    """
    files: list[InputFile] = []
    for raw in paths:
        if raw.startswith(("s3://", "s3a://")):
            try:
                store = open_store(raw, s3_endpoint=s3_endpoint)
                keys = list(store.list(""))
                bucket_and_key = raw.partition("://")[2]
                if not keys and "/" in bucket_and_key and not raw.endswith("/"):
                    # Nothing below it as a prefix: it may name one object (s3://bucket/inbox/file.json).
                    parent, _, name = raw.rpartition("/")
                    parent_store = open_store(parent, s3_endpoint=s3_endpoint)
                    if parent_store.exists(name):
                        store, keys = parent_store, [name]
                files.extend(InputFile(store.uri(k), store.read_bytes(k)) for k in keys)
            except StorageError as exc:
                raise InputError(str(exc)) from exc
            if not keys:
                raise InputError(f"{raw}: no objects under this prefix")
            continue
        path = Path(raw).expanduser()
        if path.is_dir():
            members = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            members = [path]
        else:
            raise InputError(f"{raw}: no such file or directory")
        for member in members:
            try:
                files.append(InputFile(str(member.resolve()), member.read_bytes()))
            except OSError as exc:
                raise InputError(f"{member}: cannot read ({exc.strerror or exc})") from exc
    return files


BOM = "\ufeff"
"""The byte-order mark some Windows tools write at the start of UTF-8 files (and ``cat`` of such files in the middle):
outside a JSON text it is blank (RFC 8259 lets a parser ignore it), so a message is read after it."""


def _blank_stripped(line: str) -> str:
    return line.strip().lstrip(BOM).strip()


def detect_framing(text: str) -> str:
    """Pick the framing of a file from its first non-blank line (see the module docstring)."""
    for line in text.split("\n"):
        stripped = _blank_stripped(line)
        if not stripped:
            continue
        if _is_console_line(stripped):
            return "console"
        try:
            first = json.loads(stripped)
        except ValueError:
            return "json"
        if isinstance(first, dict) and _is_kcat(first):
            return "kcat"
        if isinstance(first, list):
            return "json"
        return "jsonl"
    return "jsonl"


def _is_kcat(doc: dict[str, Any]) -> bool:
    return "payload" in doc and ("topic" in doc or "offset" in doc) and (
        doc["payload"] is None or isinstance(doc["payload"], str)
    )


def _headers(raw: Any) -> dict[str, str | None] | None:
    """kcat -J headers: a flat [name, value, ...] list (or an object) -> {name: value}."""
    if raw is None:
        return None
    pairs = raw.items() if isinstance(raw, dict) else zip(*[iter(raw)] * 2) if isinstance(raw, list) else None
    if pairs is None:
        return None
    return {_header_text(k): (None if v is None else _header_text(v)) for k, v in pairs}


def _header_text(value: Any) -> str:
    """A header name or value as text; one that is not a string keeps its JSON text (and every character of it)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _record(**fields: Any) -> dict[str, Any]:
    return {name: fields.get(name) for name in RAW_FIELDS}


class _Lines:
    """Maps character offsets of a text to 1-based line numbers and byte offsets, for increasing offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.char = 0
        self.line = 1
        self.byte = 0

    def at(self, char: int) -> tuple[int, int]:
        chunk = self.text[self.char:char]
        self.line += chunk.count("\n")
        self.byte += _utf8_length(chunk)
        self.char = char
        return self.line, self.byte


def frame_messages(text: str, *, framing: str, input_uri: str, file_index: int) -> Iterator[dict[str, Any]]:
    """Split one input's text into raw records.

    Args:
        text: The file's content.
        framing: One of :data:`FRAMINGS`; ``auto`` detects it.
        input_uri: Where the file came from (kept in every record).
        file_index: The file's index within the batch.

    Yields:
        Raw records (dicts with :data:`RAW_FIELDS`).
    """
    if framing == "auto":
        framing = detect_framing(text)
    if framing not in FRAMINGS:
        raise InputError(f"framing {framing!r} is not one of {', '.join(FRAMINGS)}")
    base = {"input": input_uri, "file_index": file_index, "framing": framing}
    if framing in ("jsonl", "kcat", "console"):
        yield from _frame_lines(text, framing=framing, base=base)
    else:
        yield from _frame_documents(text, base=base)


def _split_lines(text: str) -> list[str]:
    """The lines of a text, each with its line feed. Unlike ``str.splitlines``, only a line feed ends a line:
    U+2028, U+2029, U+0085 and the like are legal raw characters inside JSON strings and must not split a message."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _frame_lines(text: str, *, framing: str, base: dict[str, Any]) -> Iterator[dict[str, Any]]:
    index = 0
    byte = 0
    for number, line in enumerate(_split_lines(text), start=1):
        offset = byte
        byte += _utf8_length(line)
        body = _blank_stripped(line)
        if not body:
            continue
        if framing == "kcat":
            yield _kcat_record(body, base=base, index=index, line=number, offset=offset)
            index += 1
            continue
        if framing == "console":
            # (only the line break is cut: a tab at either end separates an empty key or value)
            yield _console_record(line.rstrip("\r\n").lstrip(BOM), base=base, index=index, line=number,
                                  offset=offset)
            index += 1
            continue
        # (the line's first message is at the line's start, blanks before it included, as before; the bytes before
        # a later one are counted on from the one before it, so a line of many documents stays linear)
        at, counted, lead = offset, 0, -1
        for start, value in _line_documents(body):
            if start:
                lead = line.find(body) if lead < 0 else lead
                at += _utf8_length(line[counted:lead + start])
                counted = lead + start
            yield _record(**base, index=index, line=number, byte_offset=at, value=value)
            index += 1


# After a JSON value's closing brace come only `,`, `}`, `]`, blanks or the end; anything else is in a string, or
# starts more text after the line's first document (a cheap test before parsing the line). A quote or a backslash
# is left out too: they follow the braces of JSON text held in a string (a JSON column's value), on many lines.
_MORE_AFTER_BRACE = re.compile(r'\}\s*[^\s,\]}"\\]')


def _line_documents(body: str) -> Iterator[tuple[int, str]]:
    """The messages of a JSON Lines line, as (character offset in the line, text): the line itself, or, when it
    holds several concatenated documents (``{..}{..}``, as feldera's JSON parser takes a chunk of them), each of
    them and any text after the last one that does not parse. Spark's JSON reader takes a value's first document
    and drops the rest without a word, so the rest must not stay in the same message."""
    if _MORE_AFTER_BRACE.search(body) is None:
        yield 0, body
        return
    decoder = json.JSONDecoder(strict=False)
    pos = 0
    while pos < len(body):
        try:
            _, end = decoder.raw_decode(body, pos)
        except (ValueError, RecursionError):  # (nested deeper than Python parses: the JSON reader judges it)
            end = len(body)
        if pos == 0 and end == len(body):
            yield 0, body
            return
        yield pos, body[pos:end]
        pos = end
        while pos < len(body) and body[pos] in " \t\r\n":
            pos += 1


def record_documents_error(value: str) -> str | None:
    """Why a Kafka record's value cannot be read as its message: it holds several concatenated JSON documents
    (``{..}{..}``), or text after its first. A record carries one message; read as one, only its first document
    would count and the rest would be dropped without a word, so such a record is quarantined whole instead."""
    if _MORE_AFTER_BRACE.search(value) is None:
        return None
    documents = sum(1 for _ in _line_documents(value.strip(" \t\r\n")))
    if documents < 2:
        return None
    return (f"the Kafka record's value holds {documents} JSON documents, or text after its first one; a record "
            "carries one message (write each change as a record of its own)")


def _kcat_record(body: str, *, base: dict[str, Any], index: int, line: int, offset: int) -> dict[str, Any]:
    where = dict(base, index=index, line=line, byte_offset=offset)
    try:
        doc = json.loads(body)
    except ValueError as exc:
        return _record(**where, value=body, error=f"invalid kcat -J envelope JSON: {exc}")
    if not isinstance(doc, dict) or not _is_kcat(doc):
        return _record(**where, value=body, error="not a kcat -J envelope (needs topic/offset and payload)")
    key = doc.get("key")
    value = doc.get("payload")
    return _record(
        **where,
        error=record_documents_error(value) if isinstance(value, str) else None,
        topic=doc.get("topic"),
        partition=doc.get("partition"),
        offset=doc.get("offset"),
        timestamp=doc.get("ts"),
        headers=_headers(doc.get("headers")),
        key=key if key is None or isinstance(key, str) else json.dumps(key, ensure_ascii=False),
        value=value,
    )


# The fields kafka-console-consumer prints before a record's headers, key and value (each its `print.*` property),
# in its order, a tab after each.
_CONSOLE_FIELD = re.compile(r"(?:(CreateTime|LogAppendTime):(-?\d+)|NO_TIMESTAMP|Partition:(\d+)|Offset:(\d+)"
                            r"|LeaderEpoch:-?\d+|Delivery:\d+|NO_HEADERS)\t")


def _json_end(text: str) -> int | None:
    """Where the JSON document ``text`` starts with ends (raw control characters kept in strings), else None."""
    try:
        return json.JSONDecoder(strict=False).raw_decode(text)[1]
    except (ValueError, RecursionError):
        return None


def _console_key_value(text: str) -> tuple[str, str] | None:
    """A JSON key, a tab and a value (``print.key=true``): the key's and the value's text, else None."""
    if not text.startswith(("{", "[", '"')) or "\t" not in text:
        return None
    end = _json_end(text)
    if end is None or text[end:end + 1] != "\t":
        return None
    return text[:end], text[end + 1:]


def _is_console_line(text: str) -> bool:
    """A line of kafka-console-consumer output: it starts with a ``print.*`` field, or is a key (JSON, or text
    without braces or quotes), a tab and a JSON object."""
    if _CONSOLE_FIELD.match(text) or _console_key_value(text) is not None:
        return True
    key, tab, value = text.partition("\t")
    if not tab or not value.startswith("{") or any(c in key for c in '{["'):
        return False
    try:
        json.loads(value)
    except (ValueError, RecursionError):
        return False
    return True


def _console_headers(text: str) -> dict[str, str | None]:
    """``print.headers=true``: ``name:value`` pairs separated by commas; a comma inside a JSON value (Debezium's
    ``__debezium.oldkey`` of a key of several columns) does not end it."""
    items, depth, quoted, escaped, start = [], 0, False, False, 0
    for i, c in enumerate(text):
        if escaped:
            escaped = False
        elif quoted:
            escaped, quoted = c == "\\", c != '"'
        elif c == '"':
            quoted = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        elif c == "," and depth <= 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    pairs = (item.partition(":") for item in items)
    return {name: None if value == "null" else value for name, _, value in pairs}


def _console_record(body: str, *, base: dict[str, Any], index: int, line: int, offset: int) -> dict[str, Any]:
    """One line of kafka-console-consumer output (see the module docstring)."""
    fields: dict[str, Any] = {}
    pos = 0
    while (m := _CONSOLE_FIELD.match(body, pos)) is not None:
        kind, ts, partition, kafka_offset = m.groups()
        if kind is not None:
            fields["timestamp"] = int(ts)
        if partition is not None:
            fields["partition"] = int(partition)
        if kafka_offset is not None:
            fields["offset"] = int(kafka_offset)
        pos = m.end()
    rest = body[pos:]
    first, tab, after = rest.partition("\t")
    if tab and "\t" in after and ":" in first and not first.startswith(("{", "[", '"')):
        fields["headers"] = _console_headers(first)  # (headers, key, value)
        rest = after
    key, value = _console_key_value(rest) or (None, rest)
    # (a key that is not JSON, a string converter's; a tab inside a value of one JSON document is the value's)
    if key is None and "\t" in rest and not (rest.startswith(("{", "[", '"')) and _json_end(rest) == len(rest)):
        key, _, value = rest.partition("\t")
    value = None if value == "null" else value
    return _record(**base, index=index, line=line, byte_offset=offset, **fields,
                   key=None if key == "null" else key, value=value,
                   error=None if value is None else record_documents_error(value))


def _frame_documents(text: str, *, base: dict[str, Any]) -> Iterator[dict[str, Any]]:
    # strict=False: raw control characters (newlines) inside strings, as Tencent CKafka prints its DDL, are kept.
    decoder = json.JSONDecoder(strict=False)
    lines = _Lines(text)
    index = 0
    pos = 0
    end_text = len(text)
    while True:
        while pos < end_text and text[pos] in " \t\r\n," + BOM:
            pos += 1
        if pos >= end_text:
            return
        line, byte = lines.at(pos)
        try:
            doc, end = decoder.raw_decode(text, pos)
        except ValueError as exc:
            nxt = _RESYNC.search(text, pos + 1)
            stop = nxt.start() if nxt else end_text
            yield _record(**base, index=index, line=line, byte_offset=byte,
                          value=text[pos:stop].strip(), error=f"invalid JSON: {exc}")
            index += 1
            pos = stop
            continue
        if isinstance(doc, list):
            # A JSON array of messages: each element is one message, located at the array's line.
            for element in doc:
                yield _document_record(element, base=base, index=index, line=line, offset=byte)
                index += 1
        else:
            yield _document_record(doc, base=base, index=index, line=line, offset=byte, raw=text[pos:end])
            index += 1
        pos = end


def _document_record(doc: Any, *, base: dict[str, Any], index: int, line: int, offset: int,
                     raw: str | None = None) -> dict[str, Any]:
    if isinstance(doc, dict) and _is_kcat(doc):
        return _kcat_record(json.dumps(doc), base=dict(base, framing="kcat"), index=index, line=line, offset=offset)
    return _record(**base, index=index, line=line, byte_offset=offset,
                   value=raw if raw is not None else json.dumps(doc, ensure_ascii=False))


def _input_text(f: InputFile) -> tuple[str, str | None]:
    """An input's text, and why it stops early when its compressed stream does (:func:`_decompressed`).

    Plain, gzip- or zstd-compressed (Kafka Connect's S3 sinks write ``.json.gz`` or ``.json.zst`` objects; lines
    and byte offsets are then those of the decompressed text); UTF-8, or UTF-16 with its byte-order mark (byte
    offsets are then those of its UTF-8 text). Bytes that are not UTF-8 become :data:`_UNDECODABLE` characters, so
    the messages holding them are quarantined (:func:`_mark_undecodable`) and the rest of the file lands.
    """
    data, problem = _decompressed(f.data)
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        # (a lone surrogate stays, and makes its message broken; an odd last byte is half a character)
        text = data[:len(data) - len(data) % 2].decode("utf-16", "surrogatepass")
        if len(data) % 2:
            problem = problem or "the UTF-16 text ends in half a character"
        return text, problem
    return data.decode("utf-8", "surrogateescape"), problem


def _decompressed(data: bytes) -> tuple[bytes, str | None]:
    """``data``, decompressed when it is a gzip or zstd stream (told by its magic bytes, or zstd's skippable frame
    as pzstd starts one), with every member or frame in turn; and why the stream stops early, if it does (cut
    short, or damaged): the text before that point is kept, as a plain file cut short keeps its first lines."""
    if data[:2] == GZIP_MAGIC:
        return _members(data, "gzip", lambda: zlib.decompressobj(wbits=31), zlib.error)
    if data[:4] == ZSTD_MAGIC or (data[1:4] == b"\x2a\x4d\x18" and data[0] & 0xF0 == 0x50):
        import zstandard  # a dependency of pyiceberg

        return _members(data, "zstd", lambda: zstandard.ZstdDecompressor().decompressobj(), zstandard.ZstdError)
    return data, None


_CHUNK = 1 << 20
_BETWEEN_MEMBERS = b"\x00 \t\r\n"
"""Bytes a writer may leave between or after compressed members (zero padding, a newline)."""


def _members(data: bytes, kind: str, stream: Callable[[], Any], error: type[Exception]) -> tuple[bytes, str | None]:
    # Fed in chunks, so that each member's leftover input (unused_data) is at most a chunk, not the file's rest.
    out: list[bytes] = []
    view = memoryview(data)
    pos, member = 0, None
    while True:
        if member is None:
            while pos < len(data) and data[pos] in _BETWEEN_MEMBERS:
                pos += 1
            if pos >= len(data):
                return b"".join(out), None
            member = stream()
        chunk = view[pos:pos + _CHUNK]
        pos += len(chunk)
        try:
            out.append(member.decompress(chunk))
        except error as exc:
            return b"".join(out), f"the {kind} stream is damaged after {sum(map(len, out))} decompressed bytes ({exc})"
        if member.eof:
            pos -= len(member.unused_data)
            member = None
        elif pos >= len(data):
            return b"".join(out), f"the {kind} stream is cut short after {sum(map(len, out))} decompressed bytes"


_UNDECODABLE = re.compile("[\ud800-\udfff]")
"""A character no UTF-8 text holds: an input byte that is not UTF-8 (``surrogateescape`` maps byte ``b`` to
U+DC00+b), or a lone surrogate a JSON escape spelled (an array element or kcat payload, once parsed)."""


def _mark_undecodable(record: dict[str, Any]) -> dict[str, Any]:
    """A raw record any of whose texts (key, value, topic, headers, a kcat envelope's other fields) holds
    :data:`_UNDECODABLE` characters gets an error saying where (the record is quarantined by normalization). To
    be stored as UTF-8, an undecodable byte is written ``\\xHH``, which no JSON text holds (a replay of the message
    is quarantined again, never applied with a changed value), and a lone surrogate U+FFFD."""
    for field, value in record.items():
        if field == "error" or value is None or isinstance(value, (bool, int, float)):
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        found = _UNDECODABLE.search(text)
        if found is None:
            continue
        code = ord(found.group())
        if record["error"] is None:
            what = (f"byte 0x{code - 0xDC00:02X}" if _is_byte(code)
                    else f"lone surrogate U+{code:04X} (a JSON escape of half a character)")
            stored = r"\xHH" if _is_byte(code) else "U+FFFD"
            record["error"] = (f"not UTF-8 text: {what} at character {found.start()} of the message {field} (stored "
                               f"as {stored}; the input's encoding is not UTF-8: fix it at the producer, then land "
                               "the message again)")
        record[field] = _printable(value)
    return record


def _printable(value: Any) -> Any:
    """``value`` with each :data:`_UNDECODABLE` character of its texts (also inside lists and objects) written
    ``\\xHH`` (a byte) or U+FFFD (a lone surrogate)."""
    if isinstance(value, str):
        return _UNDECODABLE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02X}" if _is_byte(ord(m.group()))
                                else "\ufffd", value)
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value


def _utf8_length(text: str) -> int:
    """The bytes ``text`` took in its input: a byte that was not UTF-8 (``surrogateescape``) is one, a lone
    surrogate (UTF-16 input) three."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return len(text.encode("utf-8", "surrogatepass")) - 2 * len(_ESCAPED_BYTE.findall(text))


_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def _is_byte(code: int) -> bool:
    return 0xDC80 <= code <= 0xDCFF


def _next_batch_id(store: ObjectStore) -> Iterator[str]:
    """Candidate batch ids after the highest claimed one; callers claim them with put-if-absent."""
    highest = 0
    for key in store.list("claims/"):
        name = key.rsplit("/", 1)[-1]
        if name.isdigit():
            highest = max(highest, int(name))
    while True:
        highest += 1
        yield str(highest).zfill(BATCH_ID_WIDTH)


def _landed_batch(store: ObjectStore, sha: str) -> str | None:
    key = f"landed/{sha}.json"
    if not store.exists(key):
        return None
    return json.loads(store.read_bytes(key))["batch_id"]


def _repair_landed_markers(store: ObjectStore) -> None:
    """Re-create the landed markers of the newest batch: a lander that died after its manifest (the commit point)
    but before its markers would otherwise let the same input land twice."""
    manifests = [k for k in store.list("manifests/") if k.endswith(".json")]
    if not manifests:
        return
    latest = json.loads(store.read_bytes(manifests[-1]))
    for entry in latest["files"]:
        marker = f"landed/{entry['sha256']}.json"
        if not store.exists(marker):
            store.write_bytes(marker, json.dumps({"batch_id": latest["batch_id"], "input": entry["input"]}).encode())


def list_batches(settings: LakeSettings, source: str) -> list[str]:
    """Committed batch ids of a source (those with a manifest), in landing order."""
    store = raw_store(settings, source)
    return [k[len("manifests/"):-len(".json")] for k in store.list("manifests/") if k.endswith(".json")]


def read_manifest(settings: LakeSettings, source: str, batch_id: str) -> dict[str, Any]:
    """The manifest of a committed batch.

    Raises:
        StorageError: The batch has no manifest (never landed, or landing did not finish).
    """
    store = raw_store(settings, source)
    key = f"manifests/{batch_id}.json"
    if not store.exists(key):
        raise StorageError(f"batch {batch_id} of source {source!r} has no manifest at {store.uri(key)}")
    return json.loads(store.read_bytes(key))


def land_files(settings: LakeSettings, *, source: str, files: Sequence[InputFile],
               framing: str = "auto") -> tuple[str | None, bool, int, str | None]:
    """Land input files as the next micro-batch of a source, unless they were landed before.

    Inputs whose content (sha256) was landed before are not landed again. When every input was landed before,
    the batch holding the first of them is returned with ``created=False``.

    Args:
        settings: The lake.
        source: Source name (raw zone folder; batches are numbered per source).
        files: Inputs with their content.
        framing: Input framing, see :data:`FRAMINGS`.

    Returns:
        (batch id or None when there was nothing to land, created, message count, manifest URI).
    """
    store = raw_store(settings, source)
    _repair_landed_markers(store)
    fresh: list[InputFile] = []
    seen: set[str] = set()
    existing: str | None = None
    for f in files:
        sha = f.sha256
        if sha in seen:
            continue
        seen.add(sha)
        landed = _landed_batch(store, sha)
        if landed is not None:
            log.info("%s was landed before in batch %s; not landing it again", f.uri, landed)
            existing = existing or landed
        else:
            fresh.append(f)
    if not fresh:
        if existing is None:
            return None, False, 0, None
        manifest = read_manifest(settings, source, existing)
        return existing, False, manifest["message_count"], store.uri(f"manifests/{existing}.json")

    for batch_id in _next_batch_id(store):
        if store.write_bytes(f"claims/{batch_id}", b"", if_absent=True):
            break
    entries = []
    total = 0
    for file_index, f in enumerate(fresh):
        text, problem = _input_text(f)
        records = [_mark_undecodable(r) for r in frame_messages(text, framing=framing, input_uri=f.uri,
                                                                 file_index=file_index)]
        file_framing = records[0]["framing"] if records else (framing if framing != "auto" else "jsonl")
        if problem is not None:  # a broken message for what could not be read, after the messages that could
            log.warning("%s: %s; the messages before it land", f.uri, problem)
            records.append(_record(
                input=f.uri, file_index=file_index, index=len(records), line=text.count("\n") + 1,
                byte_offset=_utf8_length(text),
                framing=file_framing, value=f"(unreadable rest of a compressed input: {problem})",
                error=f"{problem}: the messages before this point landed; land the whole file again"))
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
        raw_key = f"batches/{batch_id}/part-{file_index:05d}.jsonl"
        store.write_bytes(raw_key, body)
        lines = [r["line"] for r in records]
        entries.append({
            "input": f.uri,
            "sha256": f.sha256,
            "size": len(f.data),
            "framing": file_framing,
            "messages": len(records),
            "broken": sum(1 for r in records if r["error"]),
            "first_line": min(lines) if lines else None,
            "last_line": max(lines) if lines else None,
            "raw_object": raw_key,
            "raw_sha256": hashlib.sha256(body).hexdigest(),
        })
        total += len(records)
        log.info("landed %s: %d messages (%s) -> %s", f.uri, len(records), entries[-1]["framing"], raw_key)
    manifest = {
        "batch_id": batch_id,
        "source": source,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
        "message_count": total,
        "files": entries,
        "cdclake_version": __version__,
    }
    manifest_key = f"manifests/{batch_id}.json"
    if not store.write_bytes(manifest_key, json.dumps(manifest, indent=2).encode("utf-8"), if_absent=True):
        raise StorageError(f"batch {batch_id} of {source!r} already has a manifest; another lander claimed it")
    for entry in entries:
        store.write_bytes(f"landed/{entry['sha256']}.json",
                          json.dumps({"batch_id": batch_id, "input": entry["input"]}).encode("utf-8"))
    log.info("batch %s of source %r: %d messages from %d files", batch_id, source, total, len(entries))
    return batch_id, True, total, store.uri(manifest_key)


def batch_raw_paths(settings: LakeSettings, source: str, batch_id: str) -> list[str]:
    """Local paths of a batch's raw record files (downloaded first when the raw zone is on S3)."""
    store = raw_store(settings, source)
    manifest = read_manifest(settings, source, batch_id)
    return [str(store.local_copy(entry["raw_object"])) for entry in manifest["files"]]
