"""A "worker" that never starts serving (for the startup-timeout test)."""
import time

if __name__ == "__main__":
    time.sleep(600)
