#!/usr/bin/env bash
# Re-measure the rows of src/archaudit/data/cuda.json that rest on NVIDIA's own tools:
#   - the newest PTX ISA each release's ptxas accepts   (ptx_isa.introduced_in, "ptxas-isa-measured")
#   - the real architectures each release supports      (compute_capabilities, "nvcc-list-gpu-code")
#   - what nvcc -arch=all / all-major embeds             (cmake_all.releases, "nvcc-all-dryrun")
# It downloads the PyPI wheels nvidia-cuda-nvcc (13.x: nvcc, ptxas) and nvidia-cuda-nvcc-cu12
# (12.x: ptxas only) into a temporary directory; no GPU is needed.
# Usage: tools/measure_cuda_tables.sh [VERSION ...]   (default: the releases the table lists)
set -euo pipefail
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(12.0.140 12.1.105 12.2.140 12.3.107 12.4.131 12.5.82 12.6.85 12.8.93 12.9.86
                                       13.0.88 13.1.115 13.2.86 13.3.73 13.4.92 13.5.37)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
platforms=(--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux1_x86_64 --platform manylinux2010_x86_64 --platform manylinux_2_12_x86_64 --platform manylinux_2_5_x86_64
           --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64)
ptx() { printf '.version %s\n.target sm_75\n.address_size 64\n.visible .entry k()\n{\n ret;\n}\n' "$1"; }
for v in "${versions[@]}"; do
  case "$v" in 12.*) pkg=nvidia-cuda-nvcc-cu12 ;; *) pkg=nvidia-cuda-nvcc ;; esac
  d="$work/$v"; mkdir -p "$d"
  pip download -q --no-deps --only-binary=:all: "${platforms[@]}" -d "$d" "$pkg==$v"
  unzip -q -o "$d"/*.whl -d "$d/x"
  ptxas=$(find "$d/x" -path '*bin/ptxas' -type f | head -1); chmod +x "$(dirname "$ptxas")"/*
  newest=""
  for isa in 7.8 8.0 8.1 8.2 8.3 8.4 8.5 8.6 8.7 8.8 8.9 9.0 9.1 9.2 9.3 9.4 9.5 9.6 9.7; do
    ptx "$isa" > "$d/t.ptx"
    if "$ptxas" -arch=sm_75 "$d/t.ptx" -o "$d/t.cubin" >/dev/null 2>&1; then newest=$isa; fi
  done
  echo "CUDA $v: newest PTX ISA ptxas accepts: $newest"
  echo "CUDA $v: ptxas --gpu-name values: $("$ptxas" --help | tr -s ' \n,' ' ' | grep -oE 'sm_[0-9]+[af]?' | sort -u -V | tr '\n' ' ')"
  nvcc=$(find "$d/x" -path '*bin/nvcc' -type f | head -1 || true)
  if [ -n "$nvcc" ]; then
    chmod +x "$(dirname "$nvcc")"/* "$(dirname "$nvcc")"/../nvvm/bin/* 2>/dev/null || true
    echo "CUDA $v: nvcc --list-gpu-code: $("$nvcc" --list-gpu-code | tr '\n' ' ')"
    echo 'int main(){}' > "$d/t.cu"
    for a in all all-major; do
      echo "CUDA $v: -arch=$a embeds: $(cd "$d" && "$nvcc" -arch=$a --dryrun -c t.cu 2>&1 | grep fatbinary \
        | grep -oE 'kind=(elf|ptx),sm=[0-9]+[af]?' | sed 's/kind=elf,sm=/sm_/; s/kind=ptx,sm=/compute_/' | tr '\n' ' ')"
    done
  fi
  rm -rf "$d"
done
