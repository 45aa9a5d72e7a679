#!/usr/bin/env bash
# Sets up everything mo-core needs on a fresh Debian 12 machine and skips what is
# already there: apt packages, a venv (kept outside the checkout so clean clones
# reuse it), pycaffe built from the brocolli-caffe 9.0.2 sdist, PoCL, the project
# itself (editable) and its compiled caffe.proto.
#
# Environment: MO_CORE_HOME (default ~/.cache/mo-core) holds the venv and the
# pycaffe build cache.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
home=${MO_CORE_HOME:-$HOME/.cache/mo-core}
venv=$home/venv
mkdir -p "$home"
log() { printf '[ setup ] %s\n' "$*" >&2; }

# --- 1. Debian packages ------------------------------------------------------
apt_pkgs=(g++ make cmake protobuf-compiler libprotobuf-dev libgoogle-glog-dev
  libgflags-dev libhdf5-dev libopenblas-dev libboost-system-dev
  libboost-thread-dev libboost-filesystem-dev libboost-regex-dev
  libboost-python-dev libgomp1 pocl-opencl-icd ocl-icd-libopencl1 ocl-icd-opencl-dev
  python3-dev bubblewrap libseccomp2 util-linux)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2. the venv and Python packages -------------------------------------------
if [ ! -x "$venv/bin/python" ]; then
  log "creating venv $venv"
  python3 -m venv "$venv"
fi
py=$venv/bin/python
req_stamp=$home/requirements.sha
req_hash=$(cat "$repo/requirements.txt" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$req_stamp" 2>/dev/null)" != "$req_hash" ]; then
  log "installing Python packages (requirements.txt)"
  "$py" -m pip install -q --upgrade pip
  "$py" -m pip install -q -r "$repo/requirements.txt"
  echo "$req_hash" > "$req_stamp"
fi

# --- 3. pycaffe, built from source once and cached -----------------------------
if ! GLOG_minloglevel=2 "$py" -c 'import caffe' 2>/dev/null; then
  bash "$repo/scripts/build_pycaffe.sh" "$home" "$py"
fi

# --- 4. the TensorFlow Object Detection API (its own venv: tests build OD API exports with it)
bash "$repo/scripts/odapi_venv.sh"

# --- 5. the project: compiled schema + editable install ------------------------
bash "$repo/scripts/compile_proto.sh"
"$py" -m pip install -q --no-deps --no-build-isolation -e "$repo"
log "ready: $venv"
