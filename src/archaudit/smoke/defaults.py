"""smoke's defaults, in a module that imports nothing: the command line (cli/main_smoke.py)
reads them while parsing, and the runner runs by them, without either importing the other."""

DEFAULT_TIMEOUT = 300.0  # seconds a child may run before it is killed with all it started (--timeout)

__all__ = ["DEFAULT_TIMEOUT"]
