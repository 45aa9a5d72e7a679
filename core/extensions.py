"""--extensions DIR[,DIR]: user ops (ops/*.py) and extractors (front/caffe/*.py, front/tf/*.py).

Modules are imported from the files under each directory; defining an Op or
FrontExtractorOp subclass registers it, and a user class with the op name of a
built-in one replaces it (it is imported after the built-ins).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys

from core.errors import Error

_SUBDIRS = ("ops", os.path.join("front", "caffe"), os.path.join("front", "tf"), "front")


def _import_file(path: str, framework_hint: str):
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:10]
    # the module path carries the framework so extractors register for it
    name = "mo_user_ext_{}.{}.{}".format(digest, framework_hint, os.path.splitext(os.path.basename(path))[0])
    # imported afresh each time: defining the classes is what registers them
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Error:
        raise
    except Exception as exc:
        sys.modules.pop(name, None)
        raise Error("Cannot load the extension module '{}': {}: {}", path, type(exc).__name__, exc) from exc
    return module


def load_extension_dirs(dirs: list[str]):
    import core.front.caffe.extractors  # noqa: F401  built-ins first, so user classes replace them
    import core.ops  # noqa: F401
    for d in dirs:
        if not os.path.isdir(d):
            raise Error("The extensions directory '{}' does not exist.", d)
        for sub in _SUBDIRS:
            folder = os.path.join(d, sub)
            if not os.path.isdir(folder):
                continue
            hint = "caffe" if sub.endswith("caffe") else "tf" if sub.endswith("tf") else "common"
            for fname in sorted(os.listdir(folder)):
                if fname.endswith(".py") and not fname.startswith("_"):
                    _import_file(os.path.join(folder, fname), hint)
