#!/usr/bin/env bash
# Every GPU record of records/h100/ in two runs of at most 10 minutes each, from the repository
# root on a machine with an NVIDIA GPU, torch and jax (no network needed):
#   OUT=DIR bash tools/gpu_records.sh checks     # GPU tests, trace, fixtures' launches
#   OUT=DIR bash tools/gpu_records.sh referee    # device-load of every GPU package installed
# Wheels under $WHEELS (default .whl/: archaudit's own dependencies) go into a scratch --target.
# Each part leaves one tarball of what it wrote, and a summary, in $OUT.
set -uo pipefail
part="${1:?usage: gpu_records.sh checks|referee}"
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
else
  REFEREE_TIMEOUT=520 timeout 540 bash tests/fixtures/smoke/run_on_gpu.sh "$work/referee" referee > "$work/referee.log" 2>&1
fi
tar czf "$out/$part.tgz" -C "$(dirname "$work")" "$part"
