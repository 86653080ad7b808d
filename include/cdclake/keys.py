"""Primary keys declared by the user (``--key`` / source config) for streams that carry none.

Where the key comes from, in order: a declaration naming the table (``--key TABLE=COLS``, a source config's
``key``: it overrides the stream's, as Debezium's ``message.key.columns`` overrides the table's primary key), the
message key (Debezium), the format's own field (``pkNames``), a ``CREATE TABLE`` seen in the stream, then the
default declaration (``--key COLS``, for tables whose stream carries none). A table with no key from any of them is
not applied: its changes are quarantined with a reason that says how to declare one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from cdclake.exceptions import ConfigError


@dataclass(frozen=True)
class KeySpec:
    """Declared primary keys: per table (by table name or ``namespace.table``), and a default for all tables.

    Attributes:
        per_table: Lower-cased table name or ``namespace.table`` -> key columns.
        default: Key columns for tables not named in ``per_table``, or empty.
    """

    per_table: dict[str, tuple[str, ...]] = field(default_factory=dict)
    default: tuple[str, ...] = ()

    @classmethod
    def parse(cls, values: Iterable[str] | None) -> "KeySpec":
        """Parse ``[TABLE=]COL[,COL…]`` declarations.

        Args:
            values: Declarations such as ``"id"``, ``"customers=id"``, ``"public.orders=order_id,line_no"``.

        Returns:
            The declared keys.

        Raises:
            ConfigError: An empty column list or a table declared twice.
        """
        per_table: dict[str, tuple[str, ...]] = {}
        default: tuple[str, ...] = ()
        for value in values or ():
            table, sep, columns = value.partition("=")
            if not sep:
                table, columns = "", value
            cols = tuple(c.strip() for c in columns.split(",") if c.strip())
            if not cols:
                raise ConfigError(f"--key {value!r}: expected [TABLE=]COL[,COL...] with at least one column")
            if len(set(cols)) < len(cols):
                raise ConfigError(f"--key {value!r}: a column is named twice")
            if sep and not table.strip():
                raise ConfigError(f"--key {value!r}: no table before '=' (write COL[,COL...] for every table)")
            table = table.strip().lower()
            if not table:
                if default:
                    raise ConfigError(f"--key {value!r}: a default key was already declared ({','.join(default)})")
                default = cols
            elif table in per_table:
                raise ConfigError(f"--key {value!r}: table {table!r} was already declared")
            else:
                per_table[table] = cols
        return cls(per_table, default)

    def for_table(self, table_id: str) -> tuple[str, ...]:
        """Declared key columns of a table (``namespace.table``), by full id, then bare name, then the default."""
        tid = table_id.lower()
        if tid in self.per_table:
            return self.per_table[tid]
        bare = tid.rpartition(".")[2]
        return self.per_table.get(bare, self.default)

    def override_for(self, table_id: str) -> tuple[str, ...]:
        """Key columns declared for this table by name (full id, then bare name), which win over the stream's;
        () when only the default (or nothing) applies."""
        tid = table_id.lower()
        return self.per_table.get(tid) or self.per_table.get(tid.rpartition(".")[2], ())

    def to_list(self) -> list[str]:
        """The declarations back in ``--key`` form (for XCom / subprocess arguments)."""
        out = [f"{t}={','.join(c)}" for t, c in self.per_table.items()]
        if self.default:
            out.append(",".join(self.default))
        return out
