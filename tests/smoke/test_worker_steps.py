"""What a smoke child computes (archaudit.smoke.worker_steps), where it needs no framework: the
buffers handed to ExecuTorch's runtime, and how an exception is told in an observation."""

from __future__ import annotations

from archaudit.smoke import worker_steps


def test_the_runtime_reads_buffers_that_live_as_long_as_the_module(tmp_path):
    # ExecuTorch 1.2's pybindings keep no reference to the bytes they read in place; a temporary
    # (loader(open(p, "rb").read())) is freed under them. load_held passes bytes it keeps.
    pte, ptd = tmp_path / "model.pte", tmp_path / "aoti_cuda_blob.ptd"
    pte.write_bytes(b"PTE" * 1000)
    ptd.write_bytes(b"PTD" * 100)
    given: list[tuple[int, ...]] = []

    def runtime(*buffers: bytes) -> object:  # like the pybindings: remembers where, not what
        given.append(tuple(id(b) for b in buffers))
        return object()

    held = worker_steps.load_held(runtime, str(pte), str(ptd))
    assert given == [tuple(id(b) for b in held.buffers)]
    # the very objects the runtime was handed are alive, with their bytes, while the holder is
    assert held.buffers == (pte.read_bytes(), ptd.read_bytes())
    alone = worker_steps.load_held(runtime, str(pte), None)
    assert given[-1] == (id(alone.buffers[0]),) and len(alone.buffers) == 1


def test_an_exception_is_told_by_its_type_and_text_and_cut_at_2000_characters(tmp_path):
    absent = tmp_path / "absent.pte"
    try:
        absent.read_bytes()
    except OSError as exc:
        told = worker_steps.exc_text(exc)
    assert told == f"FileNotFoundError: [Errno 2] No such file or directory: '{absent}'"
    assert worker_steps.exc_text(KeyboardInterrupt()) == "KeyboardInterrupt:"
    long = worker_steps.exc_text(RuntimeError("x" * 5000))
    assert long == "RuntimeError: " + "x" * (2000 - len("RuntimeError: ")) + " ..."
    just = "y" * (1999 - len("ValueError: "))
    assert worker_steps.exc_text(ValueError(just)) == "ValueError: " + just


def test_the_steps_load_by_path_with_the_standard_library_alone(tmp_path):
    """worker.py loads this file by path in an environment without archaudit: run alone, in a
    plain interpreter with only the standard library, it imports and names its steps."""
    import subprocess
    import sys

    code = (
        "import importlib.util, sys; "
        f"spec = importlib.util.spec_from_file_location('steps', {worker_steps.__file__!r}); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
        "print(sorted(n for n in vars(m) if n.endswith('_step')), "
        "sorted(k for k in sys.modules if k.split('.')[0] in ('archaudit', 'numpy', 'torch', 'jax')))"
    )
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['executorch_step',", "'jax_step',", "'sweep_step',", "'torch_step']", "[]"]
