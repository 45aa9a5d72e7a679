"""--extensions DIR[,DIR|FILE.py]: user ops (ops/*.py), extractors
(front/caffe/*.py, front/tf/*.py) and front replacers (front/*.py, front/caffe/*.py,
front/tf/*.py).

Modules are imported from the files under each directory (ops/, front/caffe/,
front/, in that order; files by name), or from a Python file given directly (one
file may define an extractor, its op and the op's CPU kernel: the same file is
given to the inference side with -l / add_extension). Defining an Op,
FrontExtractorOp or FrontReplacement* subclass registers it, and a user class with
the op name of a built-in one replaces it (it is imported after the built-ins).
The registries are saved before a conversion and restored after it
(`registries_snapshot` / `restore_registries`), so extensions count for one
conversion only.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys

from core.errors import Error

_SUBDIRS = ("ops", os.path.join("front", "caffe"), os.path.join("front", "tf"), "front")
_PREFIX = "mo_user_ext_"  # module names of imported extension files


def _import_file(path: str, framework_hint: str):
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:10]
    # the module path carries the framework so extractors register for it
    name = "{}{}.{}.{}".format(_PREFIX, digest, framework_hint, os.path.splitext(os.path.basename(path))[0])
    # imported afresh each time: defining the classes is what registers them
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Error:
        raise
    except SystemExit as exc:  # user code must not end the conversion quietly (exit 0, no IR)
        sys.modules.pop(name, None)
        raise Error("The extension module '{}' called sys.exit({}) while being imported. Extensions must define "
                    "classes, not end the program; remove the call.", path, _code(exc)) from None
    except Exception as exc:
        sys.modules.pop(name, None)
        raise Error("Cannot load the extension module '{}': {}: {}", path, type(exc).__name__, exc) from exc
    return module


def _code(exc: SystemExit):
    return "" if exc.code is None else repr(exc.code)


def user_exit_error(exc: SystemExit, step: str) -> Error:
    """sys.exit() called by an extension's code during a conversion pass: an error
    naming the extension file and line (found in the traceback), not a silent exit."""
    where = None
    tb = exc.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith(_PREFIX):
            where = "{}, line {}".format(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return Error("{} called sys.exit({}) during the conversion step '{}'. Extensions must report problems by "
                 "raising core.errors.Error, not end the program.", "The extension code at " + where if where
                 else "Code outside mo-core (an extension)", _code(exc), step)


def registries_snapshot():
    """The registries extensions add to (ops, extractors, replacers), as they are now."""
    import core.front.caffe.extractors  # noqa: F401
    import core.front.replacement  # noqa: F401
    import core.front.tf.object_detection  # noqa: F401  the OD API replacers (built in)
    import core.ops  # noqa: F401
    from core.front.extractor import FrontExtractorOp
    from core.front.replacement import FrontReplacementPattern
    from core.ops.op import Op
    return (dict(Op.registered_ops), {k: dict(v) for k, v in FrontExtractorOp.registered.items()},
            list(FrontReplacementPattern.registered))


def restore_registries(snapshot):
    from core.front.extractor import FrontExtractorOp
    from core.front.replacement import FrontReplacementPattern
    from core.ops.op import Op
    ops, extractors, replacers = snapshot
    Op.registered_ops.clear()
    Op.registered_ops.update(ops)
    FrontExtractorOp.registered.clear()
    FrontExtractorOp.registered.update(extractors)
    FrontReplacementPattern.registered[:] = replacers


def load_extension_dirs(dirs: list[str]):
    import core.front.caffe.extractors  # noqa: F401  built-ins first, so user classes replace them
    import core.front.replacement  # noqa: F401
    import core.front.tf.object_detection  # noqa: F401  the OD API replacers (built in)
    import core.ops  # noqa: F401
    for d in dirs:
        if os.path.isfile(d) and d.endswith(".py"):
            _import_file(d, "file")
            continue
        if os.path.isfile(d):
            raise Error("The extension '{}' is not a Python file: --extensions takes directories with ops/ and "
                        "front/ folders, or .py files.", d)
        if not os.path.isdir(d):
            raise Error("The extensions directory '{}' does not exist (--extensions takes directories with ops/ "
                        "and front/ folders, or Python files).", d)
        for sub in _SUBDIRS:
            folder = os.path.join(d, sub)
            if not os.path.isdir(folder):
                continue
            hint = "caffe" if sub.endswith("caffe") else "tf" if sub.endswith("tf") else "common"
            for fname in sorted(os.listdir(folder)):
                if fname.endswith(".py") and not fname.startswith("_"):
                    _import_file(os.path.join(folder, fname), hint)
