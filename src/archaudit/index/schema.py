"""The index database: SQLite (standard library), one versioned schema, documented in docs/index.md.

A wheel is one row of `wheels`, keyed by its sha256; what its audit read (libraries,
containers, entries, kernels) and what it found (findings, library verdicts) hang off that
row by `wheel_id`. The inventory is stored whole, so a query can rebuild it and judge it again
with the rules of the archaudit that runs the query (archaudit.index.store.inventory_of).
"""

from __future__ import annotations

import sqlite3

from ..errors import UsageError

SCHEMA_VERSION = 7  # 5: folded findings; 6: vendor identity and version strings; 7: dispatch (smoke traces)

DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS wheels (
    id INTEGER PRIMARY KEY,
    sha256 TEXT NOT NULL UNIQUE,        -- of the whole file; 'url:<URL>' or 'path:<path>' when not known
    sha256_checked INTEGER NOT NULL,    -- 1: computed from every byte; 0: as the index gave it
    file TEXT NOT NULL,                 -- the wheel's file name
    location TEXT NOT NULL,             -- path or URL it was read from (last seen)
    size INTEGER NOT NULL,              -- bytes of the wheel
    project TEXT NOT NULL,              -- normalised (PEP 503)
    version TEXT NOT NULL,
    build TEXT NOT NULL,
    tags TEXT NOT NULL,                 -- python-abi-platform, as in the file name
    upload_time TEXT,                   -- from a PEP 691 index, when it says
    claim_source TEXT NOT NULL,         -- given | embedded | none
    claim TEXT NOT NULL,                -- the claim's architectures ('' for none)
    verdict TEXT NOT NULL,              -- pass | fail | unusable
    exit_code INTEGER NOT NULL,         -- what `archaudit check` would exit with
    gpu_wheel INTEGER NOT NULL,
    driver_cuda TEXT,                   -- the highest driver floor of its libraries
    driver_min TEXT,
    bytes_fetched INTEGER NOT NULL,     -- bytes read from the file or over HTTP
    bytes_inflated INTEGER NOT NULL,    -- bytes of the libraries read
    seconds REAL NOT NULL,
    scope TEXT NOT NULL,                -- '' for every library, else the --libraries glob
    archaudit_version TEXT NOT NULL,    -- the archaudit that judged it
    judged_at TEXT NOT NULL,
    previous_verdict TEXT,              -- set when re-judged by another archaudit version
    previous_version TEXT,
    verdict_changed INTEGER NOT NULL DEFAULT 0,
    problems TEXT NOT NULL              -- JSON [[code, message, offset, count, examples]] of the wheel as a whole
);
CREATE TABLE IF NOT EXISTS libraries (
    wheel_id INTEGER NOT NULL REFERENCES wheels(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    format TEXT NOT NULL,
    status TEXT,                        -- pass | fail | specialised | host | unverified
    carried TEXT NOT NULL,              -- JSON list: sm_80, compute_90, gfx90a ... (loadable only)
    driver_cuda TEXT,
    driver_min TEXT,
    kernel_count INTEGER,
    needed TEXT NOT NULL,               -- JSON list
    runpath TEXT NOT NULL,              -- JSON list
    embedded_claims TEXT NOT NULL,      -- JSON list
    problems TEXT NOT NULL,             -- JSON [[code, message, offset, count, examples]]
    notes TEXT NOT NULL,                -- JSON list
    linkers TEXT NOT NULL,              -- JSON list: names holding nvJitLinkCreate (a run-time linker)
    statements TEXT NOT NULL,           -- JSON list: sourced statements its bytes hold (data/vendor.json)
    PRIMARY KEY (wheel_id, idx)
);
CREATE TABLE IF NOT EXISTS containers (
    wheel_id INTEGER NOT NULL REFERENCES wheels(id) ON DELETE CASCADE,
    library_idx INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    vendor TEXT NOT NULL,
    role TEXT NOT NULL,
    section TEXT NOT NULL,
    offset INTEGER NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (wheel_id, library_idx, idx)
);
CREATE TABLE IF NOT EXISTS entries (
    wheel_id INTEGER NOT NULL REFERENCES wheels(id) ON DELETE CASCADE,
    library_idx INTEGER NOT NULL,
    container_idx INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    vendor TEXT NOT NULL,
    kind TEXT NOT NULL,                 -- sass | ptx | lto | code-object
    target TEXT NOT NULL,
    code_version TEXT NOT NULL,         -- "major.minor"
    compression TEXT NOT NULL,
    stored_size INTEGER NOT NULL,
    size INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    identifier TEXT NOT NULL,
    debug INTEGER NOT NULL,
    kernels_read INTEGER NOT NULL,      -- 0: kernel names not read (kernels rows absent)
    toolkit TEXT,
    decoded INTEGER NOT NULL,
    ptx_target TEXT,
    unresolved TEXT NOT NULL,           -- JSON list
    own_target TEXT,                    -- an AMD code object's own target ID (its e_flags)
    defines_nothing INTEGER NOT NULL,   -- 1: a decoded cubin that defines no kernel and no symbol
    PRIMARY KEY (wheel_id, library_idx, container_idx, idx)
);
CREATE TABLE IF NOT EXISTS kernels (
    wheel_id INTEGER NOT NULL REFERENCES wheels(id) ON DELETE CASCADE,
    library_idx INTEGER NOT NULL,
    container_idx INTEGER NOT NULL,
    entry_idx INTEGER NOT NULL,
    name TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS findings (
    wheel_id INTEGER NOT NULL REFERENCES wheels(id) ON DELETE CASCADE,
    code TEXT NOT NULL,
    severity TEXT NOT NULL,
    subject TEXT NOT NULL,
    message TEXT NOT NULL,              -- the first one's, when folded
    count INTEGER NOT NULL,             -- how many findings of its code on its subject it stands for
    examples TEXT NOT NULL              -- JSON list: the first 5 messages when folded, else []
);
CREATE TABLE IF NOT EXISTS verdicts (   -- every judgement of a wheel, oldest first
    sha256 TEXT NOT NULL,
    archaudit_version TEXT NOT NULL,
    verdict TEXT NOT NULL,
    judged_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS files (      -- local files already hashed: a rerun skips hashing them
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dispatch (  -- the containers a GPU launched kernels from, read from smoke trace reports
    report_sha256 TEXT NOT NULL,        -- of the smoke JSON report it was read from (a report is stored once)
    gpu TEXT NOT NULL,                  -- the GPU's name, as the driver gave it
    sm TEXT NOT NULL,                   -- sm_90
    driver TEXT,                        -- the CUDA version the driver reported
    distribution TEXT NOT NULL,         -- what smoke tested (its name and version)
    version TEXT NOT NULL,
    library TEXT NOT NULL,              -- the library file, as the report names it
    container_idx INTEGER NOT NULL,     -- its container, as check numbers them
    container_offset INTEGER NOT NULL,
    served TEXT NOT NULL,               -- the entry that served the GPU: "sm_90a SASS", "sm_80 PTX (JIT)"
    launches INTEGER NOT NULL,
    containers_total INTEGER NOT NULL,  -- the library's NVIDIA containers
    containers_without_code INTEGER NOT NULL,  -- of those, check's count without code for this GPU
    recorded_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS dispatch_gpu ON dispatch(sm, library);
CREATE INDEX IF NOT EXISTS wheels_release ON wheels(project, version);
CREATE INDEX IF NOT EXISTS kernels_wheel ON kernels(wheel_id);
CREATE INDEX IF NOT EXISTS findings_wheel ON findings(wheel_id, code);
"""


def connect(path: str, *, create: bool) -> sqlite3.Connection:
    """Open (or create) an index database, refusing one of another schema version."""
    try:
        db = sqlite3.connect(path if create else f"file:{path}?mode=ro", uri=not create, timeout=30)
    except sqlite3.Error as e:
        raise UsageError(f"--db {path}: cannot open: {e}") from None
    try:
        db.execute("PRAGMA foreign_keys = ON")
        if create:
            db.execute("PRAGMA journal_mode = WAL")
            db.executescript(DDL)
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            db.commit()
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as e:
        db.close()
        raise UsageError(f"--db {path}: not an archaudit index: {e}") from None
    if row is None or row[0] != str(SCHEMA_VERSION):
        db.close()
        raise UsageError(
            f"--db {path}: schema version {row[0] if row else 'missing'}, this archaudit reads version {SCHEMA_VERSION}"
        )
    return db


__all__ = ["DDL", "SCHEMA_VERSION", "connect"]
