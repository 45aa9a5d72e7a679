"""Worker processes that import one framework each (caffe, tensorflow) and serve
the core over the microkernel protocol. The core never imports those frameworks."""
