"""The errors cdclake raises. One base class; narrow subclasses whose messages name the file, field and value."""

from __future__ import annotations


class CdclakeError(Exception):
    """Base class of every error cdclake raises on purpose."""


class ConfigError(CdclakeError):
    """A setting, CLI argument or config file is missing or invalid."""


class InputError(CdclakeError):
    """An input file or object cannot be read (missing, unreadable, not a supported framing)."""


class StorageError(CdclakeError):
    """The raw zone or an inbox could not be read or written."""


class UnknownFormatError(ConfigError):
    """A change-stream format name that no normalizer is registered for."""


class SchemaError(CdclakeError):
    """A change cannot be mapped onto the target table's schema (incompatible type change, unknown type)."""


class SourceConfigError(ConfigError):
    """A source config file (``include/sources/*.yaml``) is invalid; the message names the file, line and field."""


class TableLockTimeout(CdclakeError):
    """Another apply or maintenance run held a table's lock (``cdclake.locks``) for longer than this one would
    wait (``CDCLAKE_TABLE_LOCK_TIMEOUT``)."""


class ApplyFailedError(CdclakeError):
    """Applying a batch failed for some tables; the others were applied, and the batch is not marked applied (a
    re-run applies it again, which changes nothing for the tables that were applied)."""

    def __init__(self, message: str, failures: dict[str, BaseException]) -> None:
        super().__init__(message)
        self.failures = failures
