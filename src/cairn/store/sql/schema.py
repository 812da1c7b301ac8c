"""The tables both stores create, written once and spelled for each database.

A table is a list of ``name type [constraints]`` lines in cairn's own column types; each
store's migrations render it in their dialect. Only what the two databases say differently
is in the type map: ids compare byte-wise on PostgreSQL (``COLLATE "C"``, as SQLite compares
text anyway), times are ``timestamptz`` there and ISO text here, JSON is ``jsonb`` or text,
booleans are ``boolean`` or 0/1.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "AGENT_TASKS",
    "EDGES",
    "PATH_LINKS",
    "Backend",
    "create_table",
    "kernel_tables",
]

Backend = Literal["sqlite", "postgres"]

# cairn's column type -> (SQLite, PostgreSQL)
_TYPES: dict[str, tuple[str, str]] = {
    "key": ("TEXT", 'text COLLATE "C"'),
    "text": ("TEXT", "text"),
    "int": ("INTEGER", "integer"),
    "small": ("INTEGER", "smallint"),
    "time": ("TEXT", "timestamptz"),
    "json": ("TEXT", "jsonb"),
    "flag": ("INTEGER", "boolean"),
    "bytes": ("BLOB", "bytea"),
    # the audit log's sequence: SQLite numbers rows itself; on PostgreSQL cairn_commit
    # assigns it under a lock, gapless and in commit order
    "seq": ("INTEGER PRIMARY KEY AUTOINCREMENT", "bigint PRIMARY KEY"),
}
_FALSE = {"sqlite": "0", "postgres": "false"}


def create_table(name: str, spec: str, backend: Backend) -> str:
    """``CREATE TABLE name (...)`` for ``backend``. ``spec`` holds one column per line
    (``name type [constraints]``); a line in capitals (``PRIMARY KEY (a, b)``, ``UNIQUE
    (...)``) is a table constraint and is kept as written."""
    side = 0 if backend == "sqlite" else 1
    lines: list[str] = []
    for raw in spec.strip().splitlines():
        line = raw.strip()
        if not line:
            continue
        column, kind, *rest = line.split(maxsplit=2)
        if column.isupper():
            lines.append(line)
            continue
        constraints = rest[0] if rest else ""
        constraints = constraints.replace("DEFAULT false", f"DEFAULT {_FALSE[backend]}")
        lines.append(f"{column} {_TYPES[kind][side]} {constraints}".rstrip())
    body = ",\n    ".join(lines)
    return f"CREATE TABLE {name} (\n    {body}\n);"


# ---- the kernel's tables, as the first migration of each store makes them ---------------

RECORDS = """
id key PRIMARY KEY
kind text NOT NULL
scope key NOT NULL
status text NOT NULL
current_version_id key NOT NULL
current_version int NOT NULL
content_hash text NOT NULL
sensitivity small NOT NULL
superseded_by key
created_at time NOT NULL
updated_at time NOT NULL
status_changed_at time NOT NULL
created_by text NOT NULL
"""
VERSIONS = """
id key PRIMARY KEY
record_id key NOT NULL REFERENCES records (id)
number int NOT NULL
content json NOT NULL
content_hash text NOT NULL
created_at time NOT NULL
created_by text NOT NULL
proposal_id key
UNIQUE (record_id, number)
"""
PROPOSALS = """
id key PRIMARY KEY
op text NOT NULL
scope key NOT NULL
record_id key
base_version_id key
base_baseline_id key
principal_id text NOT NULL
principal_roles json NOT NULL
status text NOT NULL
change json NOT NULL
created_at time NOT NULL
reason text
rule text
decided_by text
decided_at time
rebased_from key
rebased_to key
result_record_id key
result_version_id key
"""
AUDIT = """
seq seq
id key NOT NULL UNIQUE
at time NOT NULL
actor text NOT NULL
actor_roles json NOT NULL
action text NOT NULL
subject_id key
proposal_id key
rule text
reason text
from_status text
to_status text
details json NOT NULL
"""
BASELINES = """
id key PRIMARY KEY
scope key NOT NULL
name text
created_at time NOT NULL
created_by text NOT NULL
proposal_id key
"""
BASELINE_PINS = """
baseline_id key NOT NULL REFERENCES baselines (id)
record_id key NOT NULL
version_id key NOT NULL REFERENCES versions (id)
PRIMARY KEY (baseline_id, record_id)
"""
PUBLISHED = """
scope key PRIMARY KEY
baseline_id key NOT NULL REFERENCES baselines (id)
updated_at time NOT NULL
"""
PATH_LINKS = """
record_id key NOT NULL REFERENCES records (id)
path key NOT NULL
content_hash text
drifted flag NOT NULL DEFAULT false
PRIMARY KEY (record_id, path)
"""

# Edges as a domain type (a later migration of each store): an id, a scope and an ACL
# interned like a chunk's, so a walk filters edges as the index filters chunks.
EDGES = """
id key PRIMARY KEY
type key NOT NULL
src key NOT NULL
dst key NOT NULL
scope key NOT NULL
scope_id int REFERENCES scopes (id)
acl json NOT NULL
acl_id int REFERENCES acls (id)
metadata json NOT NULL DEFAULT '{}'
valid_from time
valid_to time
origin text NOT NULL
status text NOT NULL DEFAULT 'active'
created_at time NOT NULL
created_by text NOT NULL
proposal_id key
removed_at time
removed_by text
"""

AGENT_TASKS = """
id key PRIMARY KEY
context_id text NOT NULL
owner key NOT NULL
state int NOT NULL
updated_at time NOT NULL
body bytes NOT NULL
"""


def kernel_tables(backend: Backend) -> str:
    """Records, versions, proposals, the audit log and baselines, with their indexes."""
    t = {
        name: create_table(name, spec, backend)
        for name, spec in (
            ("records", RECORDS), ("versions", VERSIONS), ("proposals", PROPOSALS),
            ("audit", AUDIT), ("baselines", BASELINES), ("baseline_pins", BASELINE_PINS),
            ("published", PUBLISHED),
        )
    }  # fmt: skip
    return "\n".join(
        [
            t["records"],
            "CREATE INDEX records_scope_hash ON records (scope, content_hash);",
            "CREATE INDEX records_kind_status ON records (kind, status);",
            "CREATE INDEX records_created ON records (created_at);",
            t["versions"],
            t["proposals"],
            "CREATE INDEX proposals_status ON proposals (status, id);",
            t["audit"],
            "CREATE INDEX audit_subject ON audit (subject_id);",
            t["baselines"],
            t["baseline_pins"],
            t["published"],
        ]
    )
