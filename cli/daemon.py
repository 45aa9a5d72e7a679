"""`mo-core daemon start|stop|status`: the long-lived device daemons.

    mo-core daemon start [--device CPU] [--endpoint tcp://127.0.0.1:5555] [--key-file F]
                         [--caffe-fallback [--python-path DIR ...]]
    mo-core daemon stop [--device CPU | --all]
    mo-core daemon status
"""
import os
import time

from core.errors import Error


def add_parser(sub):
    p = sub.add_parser("daemon", help="start, stop or list the device daemons (inference runtimes)",
                       description="Manage the long-lived device daemons that run IR networks. A daemon "
                                   "records its pid and endpoint in the private runtime directory, where "
                                   "'mo-core infer', 'mo-core benchmark' and IECore find it.")
    actions = p.add_subparsers(dest="daemon_action", metavar="ACTION", parser_class=type(p))
    actions.required = True

    s = actions.add_parser("start", help="start a daemon (detached) unless one runs",
                           description="Start a device daemon in the background (its own session, output "
                                       "to daemon-<device>.log in the runtime directory) and wait until it "
                                       "answers. If one runs already, say so and exit 0.")
    s.add_argument("--device", "-d", default="CPU", help="device of the daemon (default: CPU)")
    s.add_argument("--endpoint", help="where it listens: tcp://HOST:PORT (loopback: a key is made in the runtime "
                                      "directory unless --key-file gives one; any other address needs --key-file) "
                                      "or ipc://PATH (default: a private ipc socket in the runtime directory)")
    s.add_argument("--key-file", help="HMAC key file (mode 0600) that clients must also use; required for a "
                                      "non-loopback tcp endpoint")
    s.add_argument("--threads", type=int, help="requests served in parallel (default: CPUs, at most 4)")
    s.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for it to start (default 60)")
    s.add_argument("--caffe-fallback", action="store_true",
                   help="run layers that have no kernel but that Caffe knows (IR converted with "
                        "CustomLayersMapping.xml) through a Caffe worker process")
    s.add_argument("--python-path", action="append", default=[], metavar="DIR",
                   help="with --caffe-fallback: a directory that Caffe Python layers may be imported from "
                        "(may be repeated). Python layers run only from these directories: an IR never "
                        "chooses code to import")
    s.set_defaults(func=run_start)

    t = actions.add_parser("stop", help="stop a daemon: shutdown request, then SIGTERM, then SIGKILL")
    which = t.add_mutually_exclusive_group()
    which.add_argument("--device", "-d", default="CPU", help="device of the daemon to stop (default: CPU)")
    which.add_argument("--all", action="store_true", help="stop every running daemon")
    t.add_argument("--grace", type=float, default=3.0,
                   help="seconds in-flight requests get before signals are used (default 3)")
    t.set_defaults(func=run_stop)

    st = actions.add_parser("status", help="list the running daemons")
    st.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each daemon's answer")
    st.set_defaults(func=run_status)


def _guard(fn):
    """Errors of the transport layer are user-facing too: `[ ERROR ]`, exit 1."""
    def run(args):
        from core.microkernel import MicrokernelError
        try:
            return fn(args)
        except MicrokernelError as exc:
            raise Error(str(exc)) from None
        except BrokenPipeError:
            raise  # (a reader that went away: run_reporting_errors ends quietly)
        except OSError as exc:
            raise Error("{}", exc) from None
    return run


@_guard
def run_start(args) -> int:
    from device_daemons.client import daemon
    if args.threads is not None and args.threads < 1:
        raise Error("--threads must be at least 1, got {}", args.threads)
    if args.python_path and not args.caffe_fallback:
        raise Error("--python-path is for Caffe Python layers: it needs --caffe-fallback")
    for directory in args.python_path:
        if not os.path.isdir(directory):
            raise Error("--python-path {} is not a directory", directory)
    launch = daemon.launch(args.device, endpoint=args.endpoint, key_file=args.key_file,
                           caffe_fallback=args.caffe_fallback, python_path=args.python_path,
                           threads=args.threads, startup_timeout=args.timeout)
    rec = launch.record
    if launch.started:
        print("{} daemon started: pid {}, endpoint {}".format(rec["device"], rec["pid"], rec["endpoint"]))
        if rec.get("log"):
            print("log: {}".format(rec["log"]))
    else:
        print("{} daemon is already running: pid {}, endpoint {}".format(rec["device"], rec["pid"],
                                                                          rec["endpoint"]))
        if args.endpoint and args.endpoint != rec["endpoint"]:
            print("(not moved to {}: stop it first with 'mo-core daemon stop --device {}')".format(
                args.endpoint, rec["device"]))
        if daemon.is_other_build(rec):
            print("[ WARNING ]  {} (an upgrade or a changed checkout since it started); restart it to run "
                  "this one: 'mo-core daemon stop --device {}' then start it again".format(
                      daemon.other_build(rec["device"], rec), rec["device"]))
    return 0


@_guard
def run_stop(args) -> int:
    from device_daemons.client import daemon
    devices = daemon.running_devices() if args.all else [daemon.normalize_device(args.device)]
    if args.all and not devices:
        print("no daemon is running")
    for device in devices:
        rec = daemon.stop(device, grace=args.grace)
        if rec is None:
            print("no {} daemon is running".format(device))
        else:
            print("{} daemon stopped (pid {})".format(device, rec["pid"]))
    return 0


def _duration(seconds) -> str:
    seconds = int(max(0, seconds or 0))
    days, rest = divmod(seconds, 86400)
    text = time.strftime("%H:%M:%S", time.gmtime(rest))
    return "{}d {}".format(days, text) if days else text


@_guard
def run_status(args) -> int:
    from device_daemons.client import daemon
    entries = daemon.status(timeout=args.timeout)
    if not entries:
        print("no daemon is running (start one with 'mo-core daemon start')")
        return 0
    rows = [("DEVICE", "PID", "ENDPOINT", "UPTIME", "NETWORKS", "REQUESTS")]
    for e in entries:
        if "error" in e:
            rows.append((e.get("device", "?"), str(e["pid"]), e["endpoint"],
                         _duration(time.time() - e.get("started", time.time())), "?", "?"))
        else:
            rows.append((e.get("device", "?"), str(e["pid"]), e["endpoint"], _duration(e.get("uptime")),
                         str(len(e.get("networks", []))), str(e.get("requests", 0))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    for e in entries:
        if "error" in e:
            print("[ WARNING ]  {} daemon (pid {}) is {}".format(e.get("device"), e["pid"], e["error"]))
        elif daemon.is_other_build(e):
            print("[ WARNING ]  {}; restart it to run this one".format(daemon.other_build(e.get("device"), e)))
        for n in e.get("networks", []):
            print("  {} handle {}: {} {} ({} requests)".format(
                e.get("device"), n.get("handle"), n.get("name"),
                " ".join("{}{}".format(k, list(v)) for k, v in (n.get("inputs") or {}).items()),
                n.get("requests", 0)))
    return 0
