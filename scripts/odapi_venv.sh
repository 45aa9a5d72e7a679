#!/usr/bin/env bash
# The TensorFlow Object Detection API, for the tests and benchmarks that build OD API
# exports (tests/tf/odapi/build_exports.py); the core never imports it. Skips what is there.
#
#   $MO_CORE_HOME/odapi-venv   tensorflow-cpu 2.15.1 (TF1 graphs through tf.compat.v1), the 2.8
#                              research package tf-models-research-object-detection (with the slim
#                              nets), tf-slim, tf-keras 2.15, protobuf 3.20 for its generated modules
#   $MO_CORE_HOME/odapi-2019   the 2019 package tensorflow-object-detection-api 0.1.1, put on
#                              PYTHONPATH in front of the 2.8 one by the build script (same venv:
#                              its TensorFlow is 2.15's compat.v1, tf.contrib.slim is tf-slim)
#
# Only the packages that building and exporting need are installed: the OD API packages
# are installed without their dependencies (pycocotools, tf-models-official, apache-beam...
# serve training and evaluation; build_exports.py stubs their imports).
set -euo pipefail
home=${MO_CORE_HOME:-$HOME/.cache/mo-core}
venv=$home/odapi-venv
log() { printf '[ setup ] %s\n' "$*" >&2; }
stamp=$venv/.mo-core-odapi-1
if [ ! -f "$stamp" ]; then
  log "creating the OD API venv $venv (TensorFlow 2.15.1 + object_detection 2.8)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "tensorflow-cpu==2.15.1" "tf-keras==2.15.*" "tf-slim==1.1.0" "protobuf>=3.20,<3.21" \
    "scipy" "pillow"
  "$venv/bin/pip" install -q --no-deps "tf-models-research-object-detection==2.8.0.post1"
  touch "$stamp"
fi
if [ ! -d "$home/odapi-2019/object_detection" ]; then
  log "installing the 2019 OD API (tensorflow-object-detection-api 0.1.1) into $home/odapi-2019"
  rm -rf "$home/odapi-2019"
  "$venv/bin/pip" install -q --no-deps --target "$home/odapi-2019" "tensorflow-object-detection-api==0.1.1"
fi
