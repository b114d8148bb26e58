"""The optional compiled speedups (src/archaudit/_speedups.c): the cubin tables and the search.

Optional: where no C compiler is found the build goes on without them, and archaudit runs
their Python references, which give the same answers (tests/read/test_speedups.py).
ARCHAUDIT_NO_SPEEDUPS=1 builds without them."""
import os

from setuptools import Extension, setup

build = not os.environ.get("ARCHAUDIT_NO_SPEEDUPS")
setup(ext_modules=[Extension("archaudit._speedups", ["src/archaudit/_speedups.c"], optional=True)] if build else [])
