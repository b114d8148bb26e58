"""Audit a whole index into a database you can query.

    sources (directory, simple index, URL list) -> task (one wheel: read, judge) -> store (one writer)
    engine: the task in this process, a process pool, or on Ray        reports: named queries

The schema is in archaudit.index.schema and docs/index.md.
"""
