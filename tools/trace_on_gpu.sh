#!/usr/bin/env bash
# The trace probe on a GPU machine, for records/: run from the repository root.
#   OUT=DIR bash tools/trace_on_gpu.sh
# Needs an NVIDIA GPU, torch (with its nvidia-cuda-cupti wheel) and jax with its CUDA plugins in
# python3's environment; archaudit runs from src/ (PYTHONPATH), with its C speedups where built and
# its pure-Python readers otherwise (device-env.txt says which). Wheels under $WHEELS (default
# .whl/: archaudit's own dependencies, for a machine without a package index) are installed into a
# scratch --target first. At most about 8 minutes in all. Writes at most 9 files into $OUT: the environment, the pytest log, the
# fixture, torch, JAX and ExecuTorch reports, the overhead benchmark and the index's dispatch query.
set -uo pipefail
out="${OUT:?set OUT to the directory the records go to}"
wheels="${WHEELS:-.whl}"
mkdir -p "$out"
site="$(mktemp -d)"
if ls "$wheels"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheels"/*.whl || exit 1
fi
export PYTHONPATH="$site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 ARCHAUDIT_SMOKE_RECORDS="$out"
# archaudit's C speedups, in place under src/, where gcc and Python's headers are here (the pure-Python
# readers are slower on the vendor libraries); silently without them otherwise.
if command -v gcc >/dev/null 2>&1 && python3 -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" 2>/dev/null; then
  timeout 60 python3 setup.py -q build_ext --inplace >/dev/null 2>&1 || true
fi
{
  date -u; nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv; nproc
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  python3 -m pip list 2>/dev/null | grep -iE '^(torch|jax|jaxlib|nvidia-cuda-cupti|nvidia-cublas|nvidia-cudnn|nvidia-cufft|nvidia-cusparse)'
  python3 -c "from archaudit.read import native; print('archaudit C speedups:', 'built' if native.active else 'not built: pure-Python readers')"
  python3 -c "from archaudit.smoke import cupti; print('libcupti candidates:', cupti.candidates()[:3])"
} > "$out/device-env.txt" 2>&1
timeout 200 python3 -m pytest -m gpu tests/smoke/test_trace_gpu.py -v -p no:cacheprovider --durations=0 \
  > "$out/trace-pytest.log" 2>&1
# ExecuTorch's model probe under the tracer: PyPI's executorch is a CPU build (no CudaBackend), so
# the record shows what its run launched on the GPU, if anything, and says why.
{ echo '$ archaudit smoke --installed executorch --probe trace --require-gpu'
  timeout 150 python3 -m archaudit smoke --installed executorch --probe trace --require-gpu --timeout 140
  echo "exit $?"; } > "$out/trace-executorch.txt" 2>&1
timeout 60 python3 benchmarks/bench_trace.py > "$out/trace-overhead.json" 2>&1
if [ -f "$out/trace-torch.json" ]; then
  db="$(mktemp -d)/index.db"
  { timeout 30 python3 -m archaudit index --db "$db" --trace "$out/trace-torch.json" -q
    timeout 20 python3 -m archaudit query dispatch --db "$db" --gpu sm_90; } > "$out/trace-dispatch.txt" 2>&1
fi
ls -la "$out"
