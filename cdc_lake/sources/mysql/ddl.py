"""The tables a MySQL/MariaDB DDL statement renames, read from the connector's schema history.

Online schema-change tools build a copy of a table and swap it in under the table's name: gh-ost with
``RENAME /* gh-ost */ TABLE t TO _t_del, _t_gho TO t``, pt-online-schema-change with ``RENAME TABLE t
TO _t_old, _t_new TO t``.  The binlog carries no row event for the swap, so the change events after it
are the copy's, and the lake would apply them over the old table's rows.  Debezium records every DDL
statement in the connector's schema history topic; :func:`table_renames` reads one of them into the
renames it makes: ``RENAME TABLE[S] [IF EXISTS] a [WAIT n | NOWAIT] TO b[, c TO d]...`` and ``ALTER
[ONLINE] [IGNORE] TABLE a ... RENAME [TO | AS] b`` (not ``RENAME COLUMN``/``INDEX``/``KEY``).

The statement is tokenized, not matched with one pattern: comments (``/* */``, ``-- ``, ``#``) are
skipped, backquoted and double-quoted identifiers (``ANSI_QUOTES``) are names whatever they spell, and
single-quoted strings are never keywords, so a rename inside a string or a comment is none.  Keywords
are matched in any case.  A name without a schema takes ``database``, the default schema the history
record gives (a bare name when it is empty).  Executable comments (``/*! ... */``) count as comments:
no tool swaps tables inside one.

Statements that replace a table's rows in place are read too, as a :class:`TableRename` with
``replaces`` (the same stop, "rows replaced"): ``DROP TABLE[S] a[, b]`` (a table re-created under the
name starts from its new rows), MariaDB's ``CREATE OR REPLACE TABLE a``, and ``ALTER TABLE a ... DROP
PARTITION``, ``TRUNCATE PARTITION`` or ``EXCHANGE PARTITION p WITH TABLE b`` (both tables), MariaDB's
``CONVERT PARTITION p TO TABLE b`` / ``CONVERT TABLE b TO PARTITION p`` (both), and ``IMPORT`` /
``DISCARD [PARTITION ...] TABLESPACE``.  Temporary tables are never captured and are skipped.
"""

from __future__ import annotations

import re
from typing import Final

from cdc_lake.sources.capabilities import TableRename

_TOKEN: Final = re.compile(
    r"""
      (?P<skip>\s+|/\*.*?(?:\*/|$)|(?:--(?=\s|$)|\#)[^\n]*)
    | (?P<quoted>`(?:[^`]|``)*`|"(?:[^"]|"")*")
    | (?P<string>'(?:[^'\\]|\\.|'')*')
    | (?P<word>[0-9A-Za-z_$\u0080-\uffff]+)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)

_Token = tuple[str, str]
"""(kind, text): ``word`` (a keyword or bare name), ``name`` (quoted, unquoted), ``string``, ``other``."""

_NOT_TABLES: Final = frozenset({"COLUMN", "INDEX", "KEY", "CONSTRAINT"})
"""What ``ALTER TABLE ... RENAME`` may rename other than the table."""


def _tokens(statement: str) -> list[_Token]:
    tokens: list[_Token] = []
    for match in _TOKEN.finditer(statement):
        kind = match.lastgroup or "other"
        text = match.group()
        if kind == "skip":
            continue
        if kind == "quoted":
            quote = text[0]
            tokens.append(("name", text[1:-1].replace(quote * 2, quote)))
        else:
            tokens.append((kind, text))
    return tokens


class _Reader:
    """A cursor over a statement's tokens."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.at = 0

    def peek(self, ahead: int = 0) -> _Token | None:
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def keyword(self, *words: str) -> bool:
        """Consume the next token when it is one of ``words`` (unquoted, any case)."""
        token = self.peek()
        if token is not None and token[0] == "word" and token[1].upper() in words:
            self.at += 1
            return True
        return False

    def symbol(self, text: str) -> bool:
        token = self.peek()
        if token == ("other", text):
            self.at += 1
            return True
        return False

    def name(self, database: str) -> tuple[str, bool] | None:
        """A ``[schema.]table`` name, its schema defaulting to ``database``, and whether it had none;
        None when there is none."""
        first = self._identifier()
        if first is None:
            return None
        if self.symbol("."):
            second = self._identifier()
            return None if second is None else (f"{first}.{second}", False)
        return (f"{database}.{first}" if database else first), True

    def _identifier(self) -> str | None:
        token = self.peek()
        if token is None or token[0] not in ("word", "name"):
            return None
        self.at += 1
        return token[1]


def table_renames(statement: str, database: str) -> tuple[TableRename, ...]:
    """The tables ``statement`` renames, or whose rows it replaces, in its order (none for any other)."""
    reader = _Reader(_tokens(statement))
    if reader.keyword("RENAME") and reader.keyword("TABLE", "TABLES"):
        return _rename_table(reader, database)
    reader.at = 0
    if reader.keyword("ALTER"):
        while reader.keyword("ONLINE", "IGNORE"):
            pass
        if reader.keyword("TABLE"):
            return _alter_table(reader, database)
    reader.at = 0
    if reader.keyword("DROP"):
        if reader.keyword("TEMPORARY") or not reader.keyword("TABLE", "TABLES"):
            return ()
        _if_exists(reader)
        return _replaced_list(reader, database)
    reader.at = 0
    if reader.keyword("CREATE") and reader.keyword("OR") and reader.keyword("REPLACE"):
        if reader.keyword("TEMPORARY") or not reader.keyword("TABLE"):
            return ()
        _if_exists(reader)
        table = reader.name(database)
        return () if table is None else (_replaced(table),)
    return ()


def _if_exists(reader: _Reader) -> None:
    if reader.keyword("IF"):
        reader.keyword("NOT")
        reader.keyword("EXISTS")


def _replaced(table: tuple[str, bool]) -> TableRename:
    name, bare = table
    return TableRename(name, name, replaces=True, old_bare=bare, new_bare=bare)


def _replaced_list(reader: _Reader, database: str) -> tuple[TableRename, ...]:
    replaced = []
    while (table := reader.name(database)) is not None:
        replaced.append(_replaced(table))
        if not reader.symbol(","):
            break
    return tuple(replaced)


def _rename_table(reader: _Reader, database: str) -> tuple[TableRename, ...]:
    _if_exists(reader)
    renames = []
    while True:
        old = reader.name(database)
        if reader.keyword("WAIT"):
            reader.at += 1
        else:
            reader.keyword("NOWAIT")
        if old is None or not reader.keyword("TO"):
            break
        new = reader.name(database)
        if new is None:
            break
        renames.append(TableRename(old[0], new[0], old_bare=old[1], new_bare=new[1]))
        if not reader.symbol(","):
            break
    return tuple(renames)


def _alter_table(reader: _Reader, database: str) -> tuple[TableRename, ...]:
    """``ALTER TABLE a ...``: a rename of ``a``, or ``a``'s rows replaced by a partition operation."""
    _if_exists(reader)
    old = reader.name(database)
    if old is None:
        return ()
    found: list[TableRename] = []
    depth = 0
    while (token := reader.peek()) is not None:
        if token in (("other", "("), ("other", ")")):
            depth += 1 if token[1] == "(" else -1
        elif depth == 0 and reader.keyword("RENAME"):
            following = reader.peek()
            if following is not None and following[0] == "word" and following[1].upper() in _NOT_TABLES:
                continue
            reader.keyword("TO", "AS")
            new = reader.name(database)
            if new is not None:
                found.append(TableRename(old[0], new[0], old_bare=old[1], new_bare=new[1]))
            continue
        elif depth == 0 and reader.keyword("DROP", "TRUNCATE"):
            if reader.keyword("PARTITION"):
                found.append(_replaced(old))
            continue
        elif depth == 0 and reader.keyword("CONVERT"):
            if reader.keyword("PARTITION", "TABLE"):
                found.append(_replaced(old))
                while reader.peek() is not None and not reader.keyword("TO"):
                    reader.at += 1
                if reader.keyword("TABLE") and (other := reader.name(database)) is not None:
                    found.append(_replaced(other))
            continue
        elif depth == 0 and reader.keyword("IMPORT", "DISCARD"):
            if reader.keyword("PARTITION", "TABLESPACE"):
                found.append(_replaced(old))
            continue
        elif depth == 0 and reader.keyword("EXCHANGE"):
            if reader.keyword("PARTITION"):
                found.append(_replaced(old))
                while reader.peek() is not None and not reader.keyword("WITH"):
                    reader.at += 1
                reader.keyword("TABLE")
                other = reader.name(database)
                if other is not None:
                    found.append(_replaced(other))
            continue
        reader.at += 1
    return tuple(found)
