"""The check pipeline as one function: what `archaudit check` does, callable from Python.

    inventory (artifacts: zipread, scan) -> claim (claims, the binaries' own) -> audit -> filters

`check()` returns the same Report the command line renders, so a caller of the library and a
user of the CLI get the same verdict. Nothing here parses flags or prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

from .artifacts import Progress, inventories, rescan
from .audit import Policy, Report, audit
from .claims import Claim
from .scan import DEFAULT_MAX_PAYLOAD

# Codes whose messages name kernels: a library with one of them is read again, decoding, when
# the first read did not decode (the readers' one-pass decode makes this pass go away).
REFINE = ("G001", "G003", "G004", "K001", "K002")


def example_wheel() -> str:
    """The small wheel shipped with archaudit (built by nvcc 13.0), for `check --example`."""
    return str(resources.files("archaudit") / "examples" / "gpu_example-1.0-py3-none-linux_x86_64.whl")


def check(targets: Sequence[str], claim: Claim | None = None, policy: Policy | None = None, *,
          jobs: int | None = None, max_payload: int = DEFAULT_MAX_PAYLOAD, decode: bool = False,
          progress: Progress | None = None) -> Report:
    """Audit wheels, directories, files or installed distributions against a claim.

    `claim` None takes the claim a binary embeds about itself, if any; `policy` carries the
    switches, the --gpu questions and the filters. Every target is read once by one pool of
    workers; kernel names behind coverage findings are read by decoding those libraries.
    """
    policy = policy if policy is not None else Policy()
    found = inventories(list(targets), jobs=jobs, decode=decode, max_payload=max_payload, progress=progress)
    report = audit(found, claim, policy)
    if decode:
        return report
    again = []
    for inv, t in zip(found, report.targets):
        paths = {f.subject for f in t.findings if f.code in REFINE}
        paths |= {s.finding.subject for s in report.suppressed if s.finding.code in REFINE}
        again.append(rescan(inv, paths, jobs=jobs, max_payload=max_payload) if paths else inv)
    if all(a is b for a, b in zip(again, found)):
        return report
    return audit(again, claim, policy)


__all__ = ["check", "example_wheel"]
