#!/usr/bin/env bash
# Compiles the project's own file-format schemas with protoc: caffe.proto (Caffe
# models), mo_tensorflow.proto (TensorFlow GraphDef) and mo_inference.proto (the
# serving protocol's gRPC messages).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
for proto in core/front/caffe/proto/mo_caffe.proto core/front/tf/proto/mo_tensorflow.proto \
             device_daemons/serving/proto/mo_inference.proto; do
  d=$repo/$(dirname "$proto")
  f=$repo/$proto
  out=$d/$(basename "$proto" .proto)_pb2.py
  if [ ! -f "$out" ] || [ "$f" -nt "$out" ]; then
    protoc --proto_path="$d" --python_out="$d" "$f"
  fi
done
