#!/usr/bin/env bash
# Packs the CUDA tests of a CUDA build for a GPU machine that has the NVIDIA
# driver and toolkit but none of memfit's Debian libraries: the test
# programs, the memfit program and every shared library they need apart from
# glibc's own, into gpu-bundle/bundle.tar.xz (ignored by git), with
# gpu-bundle/run.sh to run there:
#
#   ./scripts/gpu_bundle.sh [build-dir]          # here, after a build with CUDA
#   tar -xJf gpu-bundle/bundle.tar.xz -C /tmp/g && /tmp/g/run.sh OUTDIR   # there
#
# run.sh runs the CUDA tests (tests/cuda_device_test.cpp,
# tests/cuda_backend_test.cpp, tests/nccl_communicator_test.cpp and
# CudaMatchesReference in tests/op_backend_test.cpp), then mlp and lenet
# training runs on --backend cuda beside --backend cpu and lenet's --profile
# on cuda, then compute-sanitizer's memcheck over every op's examples
# (skipped with MEMCHECK=0), then bench/gpu_resnet50.sh (ResNet-50 224x224
# under 16 GiB: the largest batch and step time per memory technique; skipped
# with SWEEP=0), and writes each one's output and a summary to OUTDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
programs=("$build/tests/cuda_device_test" "$build/tests/cuda_backend_test"
          "$build/tests/nccl_communicator_test" "$build/tests/op_backend_test" "$build/memfit")
for p in "${programs[@]}"; do
  [ -x "$p" ] || { echo "gpu_bundle: no $p: build first (cmake --build $build)" >&2; exit 1; }
done
grep -q "MEMFIT_HAVE_CUDA" "$build/CMakeFiles/memfit_lib.dir/flags.make" ||
  { echo "gpu_bundle: $build was configured without CUDA" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
cp "${programs[@]}" "$stage/bin/"
cp bench/gpu_resnet50.sh "$stage/bin/"
# Every library the programs load, but glibc's (the GPU machine's own are
# newer) and cuDNN's dispatcher (it opens engines of its own version: the
# GPU machine's cuDNN comes whole).
ldd "${programs[@]}" | awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libcudnn)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
cat > "$stage/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs memfit's CUDA tests, training runs and the ResNet-50 sweep on this
# GPU: summary.txt and details.tar.gz (every output) in $1.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: run.sh OUTDIR}
out=$(mktemp -d)
# cuBLAS and NCCL (opened with dlopen) and cuDNN: the toolkit's, or pip
# wheels' (nvidia/cublas, nvidia/cudnn, nvidia/nccl).
cublas=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib \
  /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH="$here/lib:$cublas${LD_LIBRARY_PATH:-}"
export OMP_WAIT_POLICY=passive
{ nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  grep -m1 'model name' /proc/cpuinfo; free -g | sed -n 2p
} > "$out/gpu.txt" 2>&1
status=0
# A hung test must not take the whole run.
for t in cuda_device_test cuda_backend_test nccl_communicator_test; do
  timeout 180 "$here/bin/$t" > "$out/$t.txt" 2>&1 || status=1
done
timeout 180 "$here/bin/op_backend_test" --gtest_filter='*CudaMatchesReference*' > "$out/op_backend_test.txt" 2>&1 || status=1
for model in mlp lenet; do
  for backend in cpu cuda; do
    timeout 120 "$here/bin/memfit" train --model "$model" --batch 64 --epochs 2 --synthetic --limit 4096 \
      --backend "$backend" > "$out/train_${model}_$backend.txt" 2>&1 || status=1
  done
done
# The kernel clock: lenet's profile by CUDA events, and its speed beside the
# run above without them (what the events cost).
timeout 120 "$here/bin/memfit" train --model lenet --batch 64 --epochs 2 --synthetic --limit 4096 \
  --backend cuda --profile > "$out/profile_lenet_cuda.txt" 2>&1 || status=1
# The tests' summary now (stdout and summary.txt), so that it comes back
# even if the sweep runs out of time.
{
  cat "$out/gpu.txt"
  for f in cuda_device_test cuda_backend_test nccl_communicator_test op_backend_test; do
    echo "== $f"; grep -E '^\[==========\] .* ran|^\[  PASSED  \] [0-9]|^\[  SKIPPED \] [0-9]|^\[  FAILED  \]' "$out/$f.txt"
  done
  for f in "$out"/train_*.txt; do echo "== $(basename "$f" .txt)"; tail -4 "$f"; done
  echo "== profile_lenet_cuda"; tail -32 "$out/profile_lenet_cuda.txt"
} | tee "$out/summary.txt"
mkdir -p "$dest"
pack() { cp "$out/summary.txt" "$dest/"; tar -czf "$dest/details.tar.gz" -C "$out" .; }
pack
# Out-of-bounds accesses and races in every kernel's examples, where the
# machine lets compute-sanitizer run; before the sweep, as its time is bounded.
if command -v compute-sanitizer > /dev/null && [ "${MEMCHECK:-1}" != 0 ]; then
  timeout 150 compute-sanitizer --tool memcheck --print-limit 20 "$here/bin/op_backend_test" \
    --gtest_filter='*CudaMatchesReference*' > "$out/memcheck.txt" 2>&1 || status=1
  { echo "== memcheck"; tail -3 "$out/memcheck.txt"; } | tee -a "$out/summary.txt"
  pack
fi
# The sweep last: it takes as long as its settings let it.
if [ "${SWEEP:-1}" != 0 ]; then
  echo "== resnet50" | tee -a "$out/summary.txt"
  "$here/bin/gpu_resnet50.sh" "$here/bin/memfit" "$out/resnet50" 2>&1 | tee -a "$out/summary.txt" || status=1
  pack
fi
exit $status
RUN
chmod +x "$stage/run.sh"
mkdir -p gpu-bundle
tar -cJf gpu-bundle/bundle.tar.xz -C "$stage" .
cp "$stage/run.sh" gpu-bundle/run.sh
ls -la gpu-bundle/bundle.tar.xz
