"""Where wheels come from: a directory (or mirror tree), a PEP 503/691 simple index, a file of URLs.

Each source yields WheelRefs: a location to read and what the source says of it (size, sha256,
upload time). Nothing here reads a wheel's bytes.
"""

from __future__ import annotations

import fnmatch
import html.parser
import json
import os
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..errors import UsageError
from . import remote

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True, slots=True)
class WheelRef:
    """One wheel to audit: a path or an http(s) URL, and what its source says about it."""

    location: str
    file: str
    size: int | None = None
    sha256: str | None = None
    upload_time: str | None = None

    @property
    def remote(self) -> bool:
        return self.location.startswith(("http://", "https://"))


@dataclass(frozen=True, slots=True)
class WheelName:
    project: str
    version: str
    build: str
    tags: str  # python-abi-platform


def wheel_name(file: str) -> WheelName | None:
    """The parts of a wheel file name (PEP 427), or None when it is not one."""
    try:
        name, version, build, tags = parse_wheel_filename(file)
    except (InvalidWheelFilename, ValueError):
        return None
    parts = file[:-4].split("-")
    tag_text = "-".join(parts[-3:])
    return WheelName(str(name), str(version), "".join(map(str, build)) if build else "", tag_text)


@dataclass(frozen=True, slots=True)
class Filters:
    """Which wheels of an index to take: glob patterns over the file name's tags."""

    platforms: tuple[str, ...] = ()  # e.g. "manylinux*x86_64"
    pythons: tuple[str, ...] = ()  # e.g. "cp311"

    def accepts(self, file: str) -> bool:
        parts = file[:-4].split("-")
        if len(parts) < 5:
            return False
        py, plat = parts[-3], parts[-1]
        if self.platforms and not any(fnmatch.fnmatch(p, g) for p in plat.split(".") for g in self.platforms):
            return False
        return not self.pythons or any(fnmatch.fnmatch(p, g) for p in py.split(".") for g in self.pythons)


def from_directory(root: str) -> Iterator[WheelRef]:
    """Every *.whl under a directory (a mirror tree too), sorted; directory links are not
    followed, a file linked twice is listed once."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            if name.lower().endswith(".whl"):
                full = os.path.join(dirpath, name)
                if os.path.isfile(full):
                    found.append(full)
    seen: set[str] = set()
    for full in sorted(found):
        real = os.path.realpath(full)
        if real not in seen:
            seen.add(real)
            yield WheelRef(full, os.path.basename(full), os.path.getsize(full))


def _url_ref(url: str, size: int | None = None, upload_time: str | None = None, sha256: str | None = None) -> WheelRef:
    parsed = urllib.parse.urlsplit(url)
    if sha256 is None and parsed.fragment.startswith("sha256="):
        sha256 = parsed.fragment[7:].lower()
    clean = urllib.parse.urlunsplit(parsed._replace(fragment=""))
    file = urllib.parse.unquote(parsed.path.rsplit("/", 1)[-1])
    return WheelRef(clean, file, size, sha256, upload_time)


def from_url_file(path: str) -> Iterator[WheelRef]:
    """A file of wheel URLs (or paths), one a line; '#' starts a comment line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise UsageError(f"{path}: cannot read the list of wheels: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(
            f"{path}: not a wheel (its name does not end in .whl) and not a list of wheel URLs (not UTF-8 text)"
        ) from None
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("http://", "https://")):
            yield _url_ref(line)
        else:
            full = line if os.path.isabs(line) else os.path.join(os.path.dirname(path), line)
            yield WheelRef(full, os.path.basename(full), os.path.getsize(full) if os.path.isfile(full) else None)


class _Links(html.parser.HTMLParser):
    """The anchors of a PEP 503 project page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            d = dict(attrs)
            if d.get("href"):
                self.links.append((d["href"] or "", d))


class PageError(remote.RemoteError):
    """A project's index page that cannot be read or makes no sense: that project's error, not the run's."""


def _json_files(body: bytes, page: str) -> list[WheelRef]:
    """The wheels of a PEP 691 page; anything not shaped as the PEP says is a PageError."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as e:
        raise PageError(f"{page}: not a JSON index page: {e}") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise PageError(f"{page}: a JSON index page without a list of files")
    refs = []
    for f in files:
        if not isinstance(f, dict):
            raise PageError(f"{page}: a file entry that is not an object")
        name, url = f.get("filename"), f.get("url")
        if not isinstance(name, str) or not name.endswith(".whl") or f.get("yanked"):
            continue
        size, hashes, uploaded = f.get("size"), f.get("hashes"), f.get("upload-time")
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        if (
            not isinstance(url, str)
            or not isinstance(size, (int, type(None)))
            or isinstance(size, bool)
            or not isinstance(sha, (str, type(None)))
            or not isinstance(uploaded, (str, type(None)))
        ):
            raise PageError(f"{page}: the entry of {name!r} is malformed (url, size, hashes or upload-time)")
        try:
            refs.append(_url_ref(urllib.parse.urljoin(page, url), size, uploaded, sha))
        except ValueError as e:
            raise PageError(f"{page}: the entry of {name!r} has a bad URL: {e}") from None
    return refs


def project_files(index: str, project: str) -> list[WheelRef]:
    """The wheels a simple index lists for one project (PEP 691 JSON, else PEP 503 HTML);
    yanked files are left out. A page that cannot be read or parsed raises PageError."""
    base = index.rstrip("/") + "/"
    page = urllib.parse.urljoin(base, canonicalize_name(project) + "/")
    try:
        body, ctype = remote.get(page, accept=f"{JSON_TYPE}, text/html;q=0.1")
    except remote.RemoteError as e:
        raise PageError(str(e)) from None
    if JSON_TYPE in ctype or body[:1] == b"{":
        return _json_files(body, page)
    return _html_files(body, page)


def _html_files(body: bytes, page: str) -> list[WheelRef]:
    refs = []
    parser = _Links()
    try:
        parser.feed(body.decode("utf-8", "replace"))
        parser.close()
        for href, attrs in parser.links:
            if "data-yanked" in attrs:
                continue
            ref = _url_ref(urllib.parse.urljoin(page, href))
            if ref.file.endswith(".whl"):
                refs.append(ref)
    except (ValueError, AssertionError, RecursionError) as e:
        raise PageError(f"{page}: not an HTML index page: {e}") from None
    return refs


def from_index(
    index: str, specs: Sequence[str], filters: Filters, errors: list[str] | None = None
) -> Iterator[WheelRef]:
    """The wheels of each `project[version range]` that an index lists and the filters accept.
    A project whose page cannot be read is a line in `errors` (raised when errors is None)."""
    for spec in specs:
        try:
            req = Requirement(spec)
        except InvalidRequirement as e:
            raise UsageError(f"--project {spec!r}: {e}") from None
        try:
            listed = project_files(index, req.name)
        except PageError as e:
            if errors is None:
                raise
            errors.append(f"{req.name}: {e}")
            continue
        for ref in listed:
            name = wheel_name(ref.file)
            if name is None or not filters.accepts(ref.file):
                continue
            if req.specifier and not req.specifier.contains(name.version, prereleases=True):
                continue
            yield ref


def resolve(
    sources: Sequence[str], specs: Sequence[str], filters: Filters, errors: list[str] | None = None
) -> list[WheelRef]:
    """Every wheel of every source, each location once, in the order given; a project page that
    cannot be read goes into `errors` when given (else raises PageError)."""
    out: dict[str, WheelRef] = {}
    for source in sources:
        if source.startswith(("http://", "https://")):
            if source.lower().split("#")[0].endswith(".whl"):
                refs: Iterator[WheelRef] = iter([_url_ref(source)])
            else:
                if not specs:
                    raise UsageError(f"{source}: an index needs --project NAME[RANGE] (which projects to read)")
                refs = from_index(source, specs, filters, errors)
        elif os.path.isdir(source):
            refs = (r for r in from_directory(source) if filters.accepts(r.file))
        elif source.lower().endswith(".whl"):
            refs = iter(
                [
                    WheelRef(
                        source, os.path.basename(source), os.path.getsize(source) if os.path.isfile(source) else None
                    )
                ]
            )
        elif os.path.isfile(source):
            refs = from_url_file(source)
        else:
            raise UsageError(f"{source}: not a directory, a wheel, a file of URLs or an http(s) index")
        for r in refs:
            out.setdefault(r.location, r)
    return list(out.values())


__all__ = [
    "Filters",
    "WheelName",
    "WheelRef",
    "from_directory",
    "from_index",
    "from_url_file",
    "PageError",
    "project_files",
    "resolve",
    "wheel_name",
]
