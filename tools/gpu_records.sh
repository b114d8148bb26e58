#!/usr/bin/env bash
# Every GPU record of records/h100/ in two runs of at most 10 minutes each, from the repository
# root on a machine with an NVIDIA GPU, torch and jax (no network needed):
#   OUT=DIR bash tools/gpu_records.sh checks     # GPU tests, trace, fixtures' launches
#   OUT=DIR bash tools/gpu_records.sh referee    # device-load of every GPU package installed
#   OUT=DIR bash tools/gpu_records.sh executorch # ExecuTorch's CUDA delegate under the trace
# The executorch part needs $ET (default .et/): the executorch wheel and the wheels it imports that
# the machine lacks, and libexecutorch_backend_cuda.so, a CUDA backend built from the executorch
# tag of that wheel against it (PyPI's wheel has none); none of it is in the repository.
# Wheels under $WHEELS (default .whl/: archaudit's own dependencies) go into a scratch --target.
# Each part leaves one tarball of what it wrote, and a summary, in $OUT.
set -uo pipefail
part="${1:?usage: gpu_records.sh checks|referee|executorch}"
out="${OUT:?set OUT}"
work="$(mktemp -d)/$part"
mkdir -p "$work"
python3 setup.py -q build_ext --inplace > "$work/build.log" 2>&1 \
  && echo "archaudit C speedups: built" > "$work/speedups.txt" || echo "archaudit C speedups: not built" > "$work/speedups.txt"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ "$part" = checks ]; then
  PYTEST_TIMEOUT=200 timeout 260 bash tests/fixtures/smoke/run_on_gpu.sh "$work/smoke" tests > "$work/smoke.log" 2>&1
  site="$(mktemp -d)"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "${WHEELS:-.whl}"/*.whl
  export PYTHONPATH="$site:$PWD/src"
  OUT="$work/trace" timeout 330 bash tools/trace_on_gpu.sh > "$work/trace.log" 2>&1
  OUT="$work" timeout 60 python3 tools/excuses_on_gpu.py > "$work/excuses.log" 2>&1
  timeout 60 python3 tools/floors_gpu.py > "$work/floors_gpu.txt" 2>&1
  timeout 60 python3 tools/gpu_inventory_check.py "$work" > "$work/inventory.log" 2>&1
elif [ "$part" = executorch ]; then
  et="${ET:-.et}" site="$(mktemp -d)"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "${WHEELS:-.whl}"/*.whl "$et"/*.whl
  mkdir -p "$site/executorch/lib" && cp "$et/libexecutorch_backend_cuda.so" "$site/executorch/lib/"
  export PYTHONPATH="$site:$PWD/src" ARCHAUDIT_SMOKE_RECORDS="$work"
  { date -u; nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
    python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
    python3 -c "import importlib.metadata as m; print('executorch', m.version('executorch'))"
    sha256sum "$et"/libexecutorch_backend_cuda.so | cut -c1-16; } > "$work/device-env.txt" 2>&1
  PYTEST_TIMEOUT=280 timeout 300 python3 -m pytest -m gpu tests/smoke/test_trace_gpu.py tests/smoke/test_smoke_gpu.py \
    -k executorch -v -p no:cacheprovider --durations=0 > "$work/pytest-executorch.log" 2>&1
else
  REFEREE_TIMEOUT=520 timeout 540 bash tests/fixtures/smoke/run_on_gpu.sh "$work/referee" referee > "$work/referee.log" 2>&1
fi
tar czf "$out/$part.tgz" -C "$(dirname "$work")" "$part"
