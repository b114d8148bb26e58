"""`archaudit query --db FILE REPORT`: named reports over an index database (archaudit.index.reports)."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from . import common

REPORTS = ("runs-on", "coverage", "lost", "driver-floor", "changed", "dispatch", "html")
FORMATS = ("text", "json", "markdown")


def configure_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "query",
        help="named reports over an index database",
        description="Reports over a database written by 'archaudit index': runs-on (--gpu), "
        "coverage, lost and driver-floor (--project), changed (verdicts a newer "
        "archaudit gives otherwise), dispatch (the containers a GPU launched from, "
        "from smoke traces stored with 'archaudit index --trace'; --gpu, --project), "
        "html (the GPU atlas of every project; with --project, "
        "one project's page with plots).",
    )
    p.add_argument("report", choices=REPORTS, metavar="REPORT", help=", ".join(REPORTS))
    p.add_argument("--db", required=True, metavar="FILE", help="the database 'archaudit index' wrote")
    p.add_argument("--gpu", metavar="NAME|sm_XX", help="runs-on: the GPU (catalog name, alias, sm_XX or gfx)")
    p.add_argument(
        "--project", metavar="NAME", help="the project (coverage, lost, driver-floor, html; runs-on: only this project)"
    )
    p.add_argument("--all", action="store_true", help="runs-on: list every wheel with its answer")
    common.add_output_options(p, FORMATS)
    p.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    from ..gpus.catalog import resolve
    from ..index import reports, schema  # SQLite and the reports, only when `query` runs
    from ..report import index as index_report

    db = schema.connect(args.db, create=False)
    try:
        if args.report == "html":
            if not args.project:  # the atlas: every project of the database, no plotting library
                from ..index import atlas

                common.write(atlas.page(db), args.output)
                return 0
            from ..report.index_html import page  # matplotlib, an optional dependency, only when asked

            common.write(
                page(
                    args.project,
                    reports.coverage(db, args.project),
                    reports.driver_floor(db, args.project),
                    reports.lost(db, args.project),
                ),
                args.output,
            )
            return 0
        if args.report == "runs-on":
            if not args.gpu:
                raise UsageError("query runs-on: give --gpu NAME")
            nvidia, amd = resolve([args.gpu])
            table = reports.runs_on(db, args.gpu, nvidia, amd, args.project, args.all)
        elif args.report == "dispatch":
            table = reports.dispatch(db, args.gpu, args.project)
        elif args.report == "changed":
            table = reports.changed(db, args.project)
        else:
            if not args.project:
                raise UsageError(f"query {args.report}: give --project NAME")
            table = {"coverage": reports.coverage, "lost": reports.lost, "driver-floor": reports.driver_floor}[
                args.report
            ](db, args.project)
    finally:
        db.close()
    fmt = args.format or "text"
    common.write(common.terminal_safe(index_report.render(table, fmt), fmt), args.output)
    return 0


__all__ = ["configure_parser", "execute"]
