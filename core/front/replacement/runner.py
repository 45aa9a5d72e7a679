"""The front replacement step of the pipeline (core/pipeline.py `front_replacements`).

It runs after attribute extraction and before shape inference, as the reference
guide places it: "the replacement happens before shape inference and creation of
data nodes". The graph is turned into its front form (view.py), then, in order:

1. the configuration files' descriptions (--tensorflow_use_custom_operations_config),
   in file order: each by the FrontReplacementFromConfigFile* class whose
   `replacement_id` is its id, or, for a description with an `op` and no class,
   by FrontReplacementFromConfigFileOp;
2. the other replacers (FrontReplacementSubgraph patterns, FrontReplacementPattern);
3. the FrontReplacementOp replacers;

each group in registration order (built-in ones, then --extensions in the order
given: per directory ops/, front/caffe/, front/tf/, front/, files by name, classes
in definition order). A replacer's `run_after()` / `run_before()` (lists of
replacer classes) move it after / before every replacer of those classes that runs
in this conversion, across groups too; all else keeps the order above (a stable
topological sort), and a cycle of such demands is an [ ERROR ] naming its classes. After each replacer, dead code is eliminated: what no model
output depends on any more goes. The graph then gets its data nodes back.

A replacer's error stops the conversion with an [ ERROR ] naming the replacer
class and the file (and line) it came from. With no replacer to run (no
configuration file, no extension defines one) the step leaves the graph as it is.
"""
from __future__ import annotations

import inspect
import logging
import os
import sys

from core.errors import Error
from core.front.custom_config import load_custom_replacement_configs, load_for_update, write_config_atomically
from core.front.replacement.config_replacers import (
    DESCRIPTIONS, FrontReplacementFromConfigFileGeneral, FrontReplacementFromConfigFileOp,
    FrontReplacementFromConfigFileSubGraph,
)
from core.front.replacement.match import describe_scope
from core.front.replacement.replacers import FrontReplacementOp, FrontReplacementPattern
from core.front.replacement.view import OUTPUT_OP, from_front_view, remove_dead_nodes, to_front_view
from ir.order import stable_topological_order

log = logging.getLogger("mo_core")
_CONFIG_CLASSES = (FrontReplacementFromConfigFileSubGraph, FrontReplacementFromConfigFileGeneral)


def run_front_replacements(graph, framework: str, configs: list[str], update: str | None = None,
                           warnings: list | None = None) -> str | None:
    """Runs every replacer on the graph. With `update`, fills in the `inputs` and
    `outputs` of that file's scope descriptions instead and returns a message: the
    conversion stops there, as the reference tool's does."""
    descriptions = load_custom_replacement_configs(configs) if configs else []
    steps = [] if update else plan(framework, descriptions)
    if not steps and not update:
        return None  # nothing to run: the graph need not change form
    to_front_view(graph)
    graph.graph["fw"] = framework
    if update:
        updated = update_config_file(graph, update)
        return ("Updated the custom replacements configuration file '{}': inputs and outputs of {}. Convert with "
                "--tensorflow_use_custom_operations_config {}.".format(
                    update, ", ".join("'{}'".format(i) for i in updated) or "no description (all had them)", update))
    graph.graph[DESCRIPTIONS] = {d.id: d for d in descriptions}
    for replacer in steps:
        run_replacer(graph, replacer, warnings if warnings is not None else [])
    del graph.graph[DESCRIPTIONS]
    from_front_view(graph)
    return None


def plan(framework: str, descriptions) -> list:
    """The replacer instances to run, in order."""
    registered = [c for c in FrontReplacementPattern.registered if c.enabled and c.applies_to(framework)]
    by_id = {}
    for cls in registered:
        if issubclass(cls, _CONFIG_CLASSES):
            by_id[cls.replacement_id] = cls  # a later class (an extension) replaces an earlier one
    steps = []
    for desc in descriptions:
        cls = by_id.get(desc.id)
        if cls is None:
            if desc.op and desc.match_kind != "general":
                steps.append(FrontReplacementFromConfigFileOp([desc]))
                continue
            raise Error("No replacer implements {}: define a {} subclass with replacement_id = '{}' in --extensions, "
                        "or give the description an 'op' to replace each match by one node of that op.",
                        desc.where(), "FrontReplacementFromConfigFileGeneral" if desc.match_kind == "general"
                        else "FrontReplacementFromConfigFileSubGraph", desc.id)
        general = issubclass(cls, FrontReplacementFromConfigFileGeneral)
        if general != (desc.match_kind == "general"):
            raise Error("{} has match_kind '{}', but its replacer {} in {} is a {}.", desc.where(), desc.match_kind,
                        cls.__name__, source_of(cls), "FrontReplacementFromConfigFileGeneral (for match_kind "
                        "general)" if general else "sub-graph replacer (for match_kind scope or points)")
        steps.append(cls())
    steps += [cls() for cls in registered if not issubclass(cls, _CONFIG_CLASSES + (FrontReplacementOp,))]
    steps += [cls() for cls in registered if issubclass(cls, FrontReplacementOp)]
    return order_by_dependencies(steps)


def order_by_dependencies(steps: list) -> list:
    """The steps, each after the classes its run_after() names and before those its
    run_before() names; otherwise in the given order. Classes that do not run in
    this conversion (disabled, another framework, no description) impose nothing."""
    by_class: dict[type, list[int]] = {}
    for i, step in enumerate(steps):
        by_class.setdefault(type(step), []).append(i)
    following = [set() for _ in steps]  # following[i]: the steps that must run after step i
    for j, step in enumerate(steps):
        for cls in _declared(step, "run_after"):
            for i in by_class.get(cls, ()):
                following[i].add(j)
        for cls in _declared(step, "run_before"):
            following[j].update(by_class.get(cls, ()))
    for i, after in enumerate(following):
        after.discard(i)  # a class naming itself orders nothing
    order, waiting = stable_topological_order([sorted(after) for after in following])
    if len(order) < len(steps):
        stuck = sorted({"{} in {}".format(type(steps[j]).__name__, source_of(type(steps[j])))
                        for j, n in enumerate(waiting) if n})
        raise Error("The replacers' run_after()/run_before() demands form a cycle among: {}. Remove one of the "
                    "demands.", "; ".join(stuck))
    return [steps[i] for i in order]


def _declared(step, method: str) -> list[type]:
    """The classes a replacer's run_after()/run_before() returns, checked."""
    try:
        classes = getattr(step, method)()
    except Exception as exc:
        raise Error("{}() of the replacer {} raised {}: {}", method, _label(step, exc), type(exc).__name__,
                    exc) from None
    if not isinstance(classes, (list, tuple)) or not all(isinstance(c, type) for c in classes):
        raise Error("{}() of the replacer {} must return a list of replacer classes, got {!r}.", method,
                    _label(step), classes)
    return list(classes)


def source_of(cls) -> str:
    try:
        path = inspect.getsourcefile(cls)
    except TypeError:
        path = None
    path = path or getattr(sys.modules.get(cls.__module__), "__file__", None)
    if not path:
        return cls.__module__
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _label(replacer, exc: BaseException | None = None) -> str:
    """How an error names a replacer: its id, class, file and the line that raised."""
    cls = type(replacer)
    if isinstance(replacer, FrontReplacementFromConfigFileOp):
        return "for {}".format(", ".join(d.where() for d in replacer.for_descriptions))
    where = code_location(cls, exc)
    rid = getattr(cls, "replacement_id", None)
    return "\"{}\" ({})".format(rid, where) if rid else where


def code_location(cls, exc: BaseException | None = None) -> str:
    """"Class in file[, line N]": a user's class (an extractor, a replacer), and the line
    of its own file that raised `exc`."""
    return "{} in {}{}".format(cls.__name__, source_of(cls), "" if exc is None else _user_line(exc, cls))


def _user_line(exc: BaseException, cls) -> str:
    """', line N' of the deepest traceback frame in the replacer's own file."""
    try:
        path = inspect.getsourcefile(cls)
    except TypeError:
        return ""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return "" if line is None else ", line {}".format(line)


def run_replacer(graph, replacer, warnings: list):
    log.debug("front replacer %s", _label(replacer))
    try:
        replacer.find_and_replace_pattern(graph)
    except Error as err:
        raise Error("Exception occurred during running replacer {}: {}", _label(replacer, err), err.message,
                    faq=err.faq) from None
    except SystemExit as exc:
        raise Error("The replacer {} called sys.exit({}). Replacers must report problems by raising "
                    "core.errors.Error.", _label(replacer, exc), "" if exc.code is None else repr(exc.code)) from None
    except Exception as exc:
        raise Error("Exception occurred during running replacer {}: {}: {}", _label(replacer, exc),
                    type(exc).__name__, exc) from exc
    # a model output whose producer went unmapped is no output any more (the guide's SSD
    # case: only detection_boxes is mapped to DetectionOutput); none left is an error
    sinks = [(n, a) for n, a in graph.nodes(data=True) if a.get("op") == OUTPUT_OP]
    lost = [(n, a) for n, a in sinks if graph.in_degree(n) == 0]
    if lost and len(lost) == len(sinks):
        raise Error("The replacer {} removed the nodes producing every model output ({}) without connecting new "
                    "ones: map them in output_edges_match (or return them from replace_op).", _label(replacer),
                    ", ".join(a["name"].rsplit("/sink_port_", 1)[0] for _, a in lost))
    for node_id, attrs in lost:
        warnings.append("The replacer {} removed the model output '{}' (nothing produces it any more).".format(
            _label(replacer), attrs["name"].rsplit("/sink_port_", 1)[0]))
        graph.remove_node(node_id)
    remove_dead_nodes(graph)


def update_config_file(graph, path: str) -> list[str]:
    """Fills in `inputs`/`outputs` of the file's scope descriptions that lack them,
    computed on this model; rewrites the file atomically. Returns the ids updated."""
    data, descriptions = load_for_update(path)
    updated = []
    for desc in descriptions:
        if desc.match_kind != "scope" or (desc.has("inputs") and desc.has("outputs")):
            continue
        inputs, outputs = describe_scope(graph, desc)
        entry = data[desc.index]
        entry.setdefault("inputs", inputs)
        entry.setdefault("outputs", outputs)
        updated.append(desc.id)
    write_config_atomically(path, data)
    return updated
