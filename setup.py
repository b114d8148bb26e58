"""The optional compiled speedups (src/archaudit/_speedups.c): the cubin tables and the search.

Optional: where no C compiler is found the build goes on without them, and archaudit runs
their Python references, which give the same answers (tests/read/test_speedups.py).
ARCHAUDIT_NO_SPEEDUPS=1 builds without them.

They use only the stable ABI of Python 3.11 (the buffer protocol joined the limited API in
3.11), so one cp311-abi3 wheel serves every CPython from 3.11 on. Python 3.10 builds no
extension and gets the pure-Python py3-none-any wheel."""
import os
import sys

from setuptools import Extension, setup

LIMITED_API = 0x030B0000  # Python 3.11: Py_buffer, PyBuffer_Release, PyArg_ParseTuple's y*

build = not os.environ.get("ARCHAUDIT_NO_SPEEDUPS") and sys.version_info >= (3, 11) \
    and sys.implementation.name == "cpython"
speedups = Extension("archaudit._speedups", ["src/archaudit/_speedups.c"], optional=True, py_limited_api=True,
                     define_macros=[("Py_LIMITED_API", hex(LIMITED_API))])
setup(ext_modules=[speedups] if build else [],
      options={"bdist_wheel": {"py_limited_api": "cp311"}} if build else {})
