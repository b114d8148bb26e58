"""The check pipeline as one function: what `archaudit check` does, callable from Python.

    inventory (artifacts: zipread, scan) -> claim (claims, the binaries' own) -> audit -> filters

`check()` returns the same Report the command line renders, so a caller of the library and a
user of the CLI get the same verdict. Nothing here parses flags or prints.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from .claims import Claim
from .judge.audit import Policy, Report, audit
from .model import TargetInventory
from .read.artifacts import Progress, inventories
from .read.fatbin import DEFAULT_MAX_PAYLOAD

Fetch = Callable[[str], "TargetInventory | None"]  # a target read elsewhere than here, or None


def example_wheel() -> str:
    """The small wheel shipped with archaudit (built by nvcc 13.0), for `check --example`."""
    from importlib import resources

    return str(resources.files("archaudit") / "examples" / "gpu_example-1.0-py3-none-linux_x86_64.whl")


def check(
    targets: Sequence[str],
    claim: Claim | None = None,
    policy: Policy | None = None,
    *,
    jobs: int | None = None,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    decode: bool = True,
    progress: Progress | None = None,
    fetch: Fetch | None = None,
) -> Report:
    """Audit wheels, directories, files or installed distributions against a claim.

    `claim` None takes the claim a binary embeds about itself, if any; `policy` carries the
    switches, the --gpu questions and the filters. Every target is read once by one pool of
    workers, every payload decoded in that one pass (`decode=False`, the CLI's --fast, reads
    entry headers only, and each library with device code then fails with E015).

    `fetch`, when given, reads the targets that are not on this machine (a wheel URL, a
    requirement: index/targets.py's `fetcher`, which the CLI and the API pass): it returns a
    target's inventory, or None for a target read here.
    """
    policy = policy if policy is not None else Policy()
    with collector_paused():
        found = _inventories(list(targets), jobs, decode, max_payload, progress, fetch)
        return audit(found, claim, policy)


def _inventories(
    targets: list[str], jobs: int | None, decode: bool, max_payload: int, progress: Progress | None, fetch: Fetch | None
) -> list[TargetInventory]:
    """Fetched targets as `fetch` reads them; the rest through one pool of readers; in the order given."""
    fetched = {i: inv for i, t in enumerate(targets) if fetch is not None and (inv := fetch(t)) is not None}
    local = iter(
        inventories(
            [t for i, t in enumerate(targets) if i not in fetched],
            jobs=jobs,
            decode=decode,
            max_payload=max_payload,
            progress=progress,
        )
    )
    return [fetched[i] if i in fetched else next(local) for i in range(len(targets))]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration, as it was before afterwards.

    A check allocates millions of small objects (kernel names, entries, their tables) that form
    no reference cycles, and the collector would walk them again and again while holding the
    interpreter lock, which the readers and decoders need (torch 2.14.1: 334 collections,
    about 0.2 s). Memory is still freed by reference counting; what cycles there are (a caught
    exception and its frames) are collected once the collector is back on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


__all__ = ["check", "example_wheel"]
