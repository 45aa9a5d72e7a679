"""The framework-fallback sandbox (issue 21): what TensorFlow may run (the
allow-list), the OS sandbox of every framework worker, fairness between clients."""
