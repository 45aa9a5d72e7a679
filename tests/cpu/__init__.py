"""CPU plugin tests (device_daemons/cpu) against real pycaffe and independent references."""
