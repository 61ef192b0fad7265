"""The one error family of lens-lakehouse.

Every error the library raises on purpose is a :class:`LakehouseError`. Subclasses carry what a
user needs to act on it: a reason ``code`` (stable, machine-readable, used in the rejected and
silver tables), and where applicable the file and line, the entry hash, or the key/field at fault.

This module imports nothing outside the standard library, so the pure core can use it.
"""

from __future__ import annotations


class LakehouseError(Exception):
    """Root of every error raised by the library on purpose.

    Attributes:
        code: a short, stable reason code (snake_case), e.g. ``"bad_signature"``.
        message: the human-readable explanation.
    """

    code: str = "error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class ConfigError(LakehouseError):
    """A setting is missing, malformed or contradicts another (names the setting and its source)."""

    code = "config"


class EntryError(LakehouseError):
    """An entry's bytes are not a valid bamboo entry (FORMAT.md section 1).

    Attributes:
        code: the defect, e.g. ``truncated``, ``trailing_bytes``, ``non_canonical_varu64``,
            ``bad_hash``, ``bad_author``, ``bad_tag``, ``seq_num_zero``, ``too_large``,
            ``out_of_range``, ``missing_backlink``, ``unexpected_backlink``,
            ``missing_skiplink``, ``unexpected_skiplink``, ``skiplink_equals_backlink``,
            ``bad_signature``, ``payload_too_large``, ``wrong_payload``, and from the log
            (:mod:`lakehouse.core.logs`) ``wrong_backlink``, ``wrong_skiplink``, ``fork``.
        entry_hash: hex of the entry hash when it could be computed, else None.
    """

    code = "bad_entry"

    def __init__(self, message: str, *, code: str | None = None, entry_hash: str | None = None) -> None:
        super().__init__(message, code=code)
        self.entry_hash = entry_hash


class MessageError(LakehouseError):
    """A payload is not a valid message (FORMAT.md section 3), or a value does not fit its lens.

    Attributes:
        code: e.g. ``not_cbor``, ``not_a_map``, ``unknown_key``, ``missing_key``, ``bad_value``,
            ``bad_kind``, ``bad_spec``, ``bad_field``, ``bad_type``, ``validation_failed``.
        path: where in the message, e.g. ``"fields[2].type"`` or ``"fields.subject"``; "" for the
            whole payload.
    """

    code = "bad_message"

    def __init__(self, message: str, *, code: str | None = None, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message, code=code)
        self.path = path


class LensFileError(LakehouseError):
    """A lens file (FORMAT.md section 4) cannot be turned into a message.

    Attributes:
        file: the file's path as given.
        line: 1-based line number, or None when the defect has no single line.
    """

    code = "bad_lens_file"

    def __init__(self, message: str, *, file: str, line: int | None = None, code: str | None = None) -> None:
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {message}", code=code)
        self.file = file
        self.line = line


class PublishError(LakehouseError):
    """Publishing was refused (unknown schema, missing key, field not in the lens, ...)."""

    code = "publish"


class EngineError(LakehouseError):
    """The Spark engine could not be started or reached (names the engine and what to do)."""

    code = "engine"


class LandingError(LakehouseError):
    """The landing folder cannot be read as one: its setting names a file, or a landing file
    changed or went away while an ingest read it (nothing of that batch is stored; the next
    ingest reads the folder as it then is). Codes: ``not_a_folder``, ``landing_changed``."""

    code = "landing_changed"


class LockError(LakehouseError):
    """Another run holds the lake's lock."""

    code = "locked"


class SnapshotError(LakehouseError):
    """A folder of table snapshots cannot be imported (:mod:`lakehouse.publish.importer`).

    Attributes:
        code: e.g. ``no_snapshots``, ``empty_snapshot``, ``binary_snapshot``, ``no_key_column``,
            ``snapshot_changed``, ``snapshot_out_of_order``, ``schema_moved``, ``key_column_changed``, ``bad_import_state``,
            ``import_state_out_of_sync``, ``schema_not_imported``.
        file: the snapshot file (or state file) at fault, or None.
    """

    code = "bad_snapshot"

    def __init__(self, message: str, *, code: str | None = None, file: str | None = None) -> None:
        super().__init__(f"{file}: {message}" if file else message, code=code)
        self.file = file


class SqlError(LakehouseError):
    """A statement the engine refused; the message is the engine's first line."""

    code = "sql"


class SchemaLogError(LakehouseError):
    """The input is not a schema log, or a version asked for does not exist or is abandoned.

    Attributes:
        code: ``not_a_schema_log`` (seq 1 is not ``schema-meta``, or no message at all),
            ``bad_seq`` (seqs not exactly 1..k, or a seq given twice), ``not_a_schema_message``,
            ``unknown_version``, ``abandoned_version``.
    """

    code = "bad_schema_log"


class ConversionError(LakehouseError):
    """A value cannot be converted between two field types, or fails the destination validation.

    Attributes:
        code: ``not_convertible`` (SEMANTICS.md section 4 lists no rule for the pair of types),
            ``conversion_failed`` (a rule exists but this value does not fit it), or
            ``validation_failed`` (converted, but the destination's pattern does not match).
    """

    code = "conversion_failed"


class HistoryError(LakehouseError):
    """No schema by that name or id in the lake."""

    code = "unknown_schema"


class ChangesError(LakehouseError):
    """A change feed that is not there: code ``unknown_name`` (no registration by that name) or
    ``no_feed`` (no change feed for that version, or none at all yet)."""

    code = "no_feed"


class RegistrationError(LakehouseError):
    """A ``register`` request that cannot be taken (unknown schema, bad or taken name)."""

    code = "registration"


class DemoError(LakehouseError):
    """The demo cannot run (its input is missing, or a step did not give what it shows)."""

    code = "demo"


class OptimizeError(LakehouseError):
    """An ``optimize`` request that names a table the lake does not have (the message lists them)."""

    code = "unknown_table"
