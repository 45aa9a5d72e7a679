"""Small C kernels of the fast CPU backend for layers oneDNN has no primitive for
(build.py compiles them once per machine and loads them with cffi in ABI mode)."""
