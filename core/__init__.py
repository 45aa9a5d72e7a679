"""mo-core's core: graph, front ends, passes, IR emission, microkernel.

Nothing under core/ imports tensorflow, caffe or pyopencl: those live in worker
processes (fallback_workers/, device_daemons/).
"""
