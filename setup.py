"""The optional compiled cubin reader (src/archaudit/_cubin.c).

Optional: where no C compiler is found the build goes on without it and archaudit reads
cubins with its Python reader, which gives the same answers (tests/test_compiled_reader.py)."""
import os

from setuptools import Extension, setup

build = not os.environ.get("ARCHAUDIT_NO_COMPILED_READER")
setup(ext_modules=[Extension("archaudit._cubin", ["src/archaudit/_cubin.c"], optional=True)] if build else [])
