#!/usr/bin/env bash
# Builds pycaffe (CPU only) from the brocolli-caffe 9.0.2 sdist - BVLC Caffe plus
# the SSD layers - and copies it into the venv's site-packages. The build tree is
# cached under $1 so a rebuilt venv only re-copies.
set -euo pipefail
home=$1; py=$2
src_root=$home/caffe-src
build=$home/caffe-build
log() { printf '[ setup ] %s\n' "$*" >&2; }

if [ ! -d "$src_root/brocolli-caffe-9.0.2" ]; then
  log "downloading the brocolli-caffe 9.0.2 sdist"
  mkdir -p "$src_root"
  "$py" -m pip download -q --no-deps --no-binary :all: -d "$src_root" brocolli-caffe==9.0.2
  tar -xzf "$src_root"/brocolli-caffe-9.0.2.tar.gz -C "$src_root"
fi
src=$src_root/brocolli-caffe-9.0.2
[ -d "$src/caffe" ] && [ -f "$src/caffe/CMakeLists.txt" ] && src=$src/caffe

if [ ! -f "$build/lib/_caffe.so" ] && [ ! -f "$build/python/caffe/_caffe.so" ]; then
  log "building pycaffe from source (about 5 minutes on 2 cores)"
  pyinc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  npinc=$("$py" -c 'import numpy; print(numpy.get_include())')
  hdf5lib=$(dirname "$(find /usr/lib -path '*hdf5/serial/libhdf5.so' | head -1)")
  boostlink=$home/boost-link
  mkdir -p "$boostlink"
  bp=$(find /usr/lib -name 'libboost_python3*.so' | sort | tail -1)
  ln -sf "$bp" "$boostlink/libboost_python.so"
  ln -sf "$bp" "$boostlink/libboost_python3.so"
  mkdir -p "$build"
  (cd "$build" && cmake "$src" -DCPU_ONLY=ON -DUSE_OPENCV=OFF -DUSE_LEVELDB=OFF \
      -DUSE_LMDB=OFF -DBUILD_python=ON -DBUILD_docs=OFF -DCMAKE_SKIP_RPATH=ON \
      -DBLAS=Open -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON -Dpython_version=3 -DCMAKE_BUILD_TYPE=Release \
      -DPYTHON_EXECUTABLE="$py" -DPYTHON_INCLUDE_DIR="$pyinc" \
      -DCMAKE_CXX_FLAGS="-DWITH_PYTHON_LAYER -I$pyinc -I$npinc -I/usr/include/hdf5/serial -I$src/src" \
      -DCMAKE_EXE_LINKER_FLAGS="-L$hdf5lib -L$boostlink" \
      -DCMAKE_SHARED_LINKER_FLAGS="-L$hdf5lib -L$boostlink" >"$build/cmake.log" 2>&1) \
    || { tail -30 "$build/cmake.log"; exit 1; }
  (cd "$build" && make -j"$(nproc)" pycaffe >"$build/make.log" 2>&1) \
    || { tail -40 "$build/make.log"; exit 1; }
fi
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf "$site/caffe"
cp -rL "$src/python/caffe" "$site/caffe"
# the build drops _caffe.so (and libcaffe) next to python/caffe in the source or
# build tree depending on the CMake version: take whichever exists
for f in "$build/lib/_caffe.so" "$src/python/caffe/_caffe.so"; do
  [ -f "$f" ] && cp -L "$f" "$site/caffe/_caffe.so" && break
done
log "pycaffe installed into $site/caffe"
