"""How the CLI reports failures: a user error is one `[ ERROR ]` block and exit
status 1; anything else is an internal error with a banner and the traceback."""
import os
import signal
import sys
import threading
import traceback

from core.errors import Error
from ir.errors import IRError


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like SIGINT's KeyboardInterrupt, so every
    `finally` runs (temporary output files removed, worker processes stopped)."""


def raise_on_sigterm():
    """From now on SIGTERM unwinds the program like Ctrl-C (main thread only)."""
    def handler(signum, frame):
        raise Terminated()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


def run_reporting_errors(fn, *args) -> int:
    try:
        return fn(*args) or 0
    except (Error, IRError) as exc:
        sys.stdout.flush()
        print("[ ERROR ]  " + str(exc).replace("\n", "\n "), file=sys.stderr)
        return 1
    except Terminated:
        print("[ ERROR ]  Terminated (SIGTERM).", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # the reader of our output went away (`| head`): end quietly, as other tools do, and keep the
        # interpreter's own flush of stdout at exit from failing again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("[ ERROR ]  Interrupted.", file=sys.stderr)
        return 1
    except MemoryError:
        print("[ ERROR ]  Out of memory.", file=sys.stderr)
        return 1
    except Exception:  # noqa: BLE001 - the one place that turns bugs into a report
        print("[ ERROR ]  -------------------------------------------------", file=sys.stderr)
        print("[ ERROR ]  ----------------- INTERNAL ERROR ----------------", file=sys.stderr)
        print("[ ERROR ]  Unexpected exception happened. Please report it with the command line and the traceback:",
              file=sys.stderr)
        traceback.print_exc()
        print("[ ERROR ]  ---------------- END OF REPORT ------------------", file=sys.stderr)
        return 2
