"""`python -m device_daemons.cpu --endpoint EP [--parent-pid PID|0] ...`: the CPU daemon."""
import sys

from device_daemons.cpu.server import main

if __name__ == "__main__":
    sys.exit(main())
