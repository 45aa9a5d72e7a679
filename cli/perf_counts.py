"""`-pc` of `mo-core infer` and `mo-core benchmark`: per-layer times the daemon
measured (a row per executed step: IR layer name, layer type, the backend that ran
it and its kernel, the precision it computed in, its time; reorders between layouts are steps of
their own; layers fused into another are listed as NOT_RUN), then why each reorder
and each layer off the fast backend is there, then a summary per layer type,
backend and precision."""
import statistics


def median_rows(runs):
    """Rows of several requests (lists of the daemon's perf dicts, same network) ->
    one list with each step's median time."""
    runs = [r for r in runs if r]
    if not runs:
        return []
    order, times, first = [], {}, {}
    for run in runs:
        for index, row in enumerate(run):
            key = (index, row.get("name"))
            if key not in first:
                first[key] = row
                order.append(key)
            times.setdefault(key, []).append(float(row.get("ms", 0.0)))
    return [dict(first[k], ms=statistics.median(times[k])) for k in order]


def _exec_type(row) -> str:
    """The backend, and its kernel where the daemon names one ("onednn brgconv:avx512_core": an
    AVX2 kernel on an AVX-512 machine shows here)."""
    kernel = row.get("kernel")
    return str(row.get("backend")) + (" " + str(kernel) if kernel else "")


def print_perf_counts(rows, title="Performance counts"):
    if not rows:
        print("[ WARNING ] the daemon sent no performance counts")
        return
    print()
    print("{} (ms per request):".format(title))
    name_w = min(48, max(len("layer name"), max(len(str(r.get("name"))) for r in rows)))
    exec_w = min(60, max(len("exec type"), max(len(_exec_type(r)) for r in rows)))
    fmt = "{:<" + str(name_w) + "}  {:<9}  {:<16}  {:<" + str(exec_w) + "}  {:<9}  {:>10}"
    print(fmt.format("layer name", "status", "layer type", "exec type", "precision", "real time"))
    total = 0.0
    for row in rows:
        executed = row.get("status") == "executed"
        ms = float(row.get("ms", 0.0))
        total += ms if executed else 0.0
        name = str(row.get("name"))
        if len(name) > name_w:
            name = "..." + name[-(name_w - 3):]
        print(fmt.format(name, "EXECUTED" if executed else "NOT_RUN", str(row.get("type")),
                         _exec_type(row)[:exec_w], str(row.get("precision", "")), "{:.3f}".format(ms)))
    print("Total time: {:.3f} ms".format(total))
    notes = [row for row in rows if row.get("note") and row.get("status") == "executed"]
    if notes:
        print()
        print("Why (reorders, layers not on the fast backend):")
        for row in notes:
            print("  {} ({}): {}".format(row.get("name"), row.get("type"), row.get("note")))
    print()
    print("Per layer type:")
    summary = {}
    for row in rows:
        if row.get("status") != "executed":
            continue
        key = (str(row.get("type")), str(row.get("backend")), str(row.get("precision", "")))
        count, ms = summary.get(key, (0, 0.0))
        summary[key] = (count + 1, ms + float(row.get("ms", 0.0)))
    fmt = "{:<16}  {:<10}  {:<9}  {:>6}  {:>10}  {:>6}"
    print(fmt.format("layer type", "backend", "precision", "layers", "ms", "%"))
    for (layer_type, backend, precision), (count, ms) in sorted(summary.items(), key=lambda kv: -kv[1][1]):
        print(fmt.format(layer_type, backend, precision, count, "{:.3f}".format(ms),
                         "{:.1f}".format(100.0 * ms / total if total else 0.0)))
