"""`python -m device_daemons.gpu --endpoint EP [--device GPU.N] ...`: the GPU daemon."""
import sys

from device_daemons.gpu.server import main

if __name__ == "__main__":
    sys.exit(main())
