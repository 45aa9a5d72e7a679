"""C helpers of the GPU plugin (built once per machine with the CPU daemon's
native build, native_build.py; loaded with cffi in ABI mode)."""
