"""--saved_model_dir, --input_meta_graph, --input_checkpoint: models that need
TensorFlow to be frozen. The core never imports TensorFlow: it asks the TF worker
(fallback_workers/tf_worker; its contract: core/services/tf_worker.py; the
converter's worker process: core/front/tf/worker.py) to freeze the model into a
GraphDef file in a private directory, then reads that file like any frozen .pb.

The worker runs with MO_CORE_TF_PYTHON (a venv of its own with TensorFlow) or
this interpreter; MO_CORE_TF_TIMEOUT (seconds, default 600) bounds the freezing.
Without TensorFlow there, the error says how to install it (FAQ #41).
"""
from __future__ import annotations

import os
import shutil
import tempfile


def frozen_graph_def(o):
    """The GraphDef TensorFlow froze for the options' model."""
    from core.front.tf import worker
    from core.front.tf.loader import load_graph_def
    from core.microkernel import runtime_dir
    from core.services import tf_worker as contract
    what = ("the SavedModel {}".format(o.saved_model_dir) if o.saved_model_dir else
            "the meta graph {}".format(o.input_meta_graph) if o.input_meta_graph else
            "{} with the checkpoint {}".format(o.input_model, o.input_checkpoint))
    work = tempfile.mkdtemp(prefix="tf-freeze-", dir=runtime_dir())
    output = os.path.join(work, "frozen.pb")
    outputs = [name.split(":")[0] for name in (o.output or "").split(",") if name.strip()] or None
    request = contract.freeze_request(
        output_path=output, saved_model_dir=_abs(o.saved_model_dir), meta_graph=_abs(o.input_meta_graph),
        input_model=_abs(o.input_model), input_model_is_text=o.input_model_is_text,
        checkpoint=_abs(o.input_checkpoint), outputs=outputs,
        saved_model_tags=[t.strip() for t in o.saved_model_tags.split(",") if t.strip()] if o.saved_model_tags
        else None, saved_model_signature=o.saved_model_signature)
    try:
        result, _ = worker.call(contract.FREEZE, request, [], "freezing " + what,
                                failed="TensorFlow could not freeze " + what, sandbox=contract.freeze_sandbox(request))
        contract.check_freeze_result(result)
        return load_graph_def(output)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _abs(path):
    return os.path.abspath(path) if path else None
