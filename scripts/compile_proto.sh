#!/usr/bin/env bash
# Compiles the project's own caffe.proto (the Caffe file format schema) with protoc.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
d=$repo/core/front/caffe/proto
if [ ! -f "$d/mo_caffe_pb2.py" ] || [ "$d/mo_caffe.proto" -nt "$d/mo_caffe_pb2.py" ]; then
  protoc --proto_path="$d" --python_out="$d" "$d/mo_caffe.proto"
fi
