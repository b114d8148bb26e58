"""archaudit smoke: the runtime half. Install a wheel in isolation; in child interpreters,
dlopen its libraries, hand its device code to the CUDA driver, and run models with weights.

Kept light: child interpreters of environments without archaudit load worker.py and
cuda_driver.py by path, and importing this package imports nothing else.
"""

__all__ = ["run_smoke", "render_text", "to_json"]


def __getattr__(name: str) -> object:
    if name in ("run_smoke", "SmokeInputError"):
        from . import runner

        return getattr(runner, name)
    if name in ("render_text", "to_json"):
        from ..report import smoke as render

        return getattr(render, name)
    raise AttributeError(name)
