"""The embedded backend (ModelManager) on a real CPU daemon, without the front end:
the models asked for at start load one after the other, and one that cannot be
loaded (here an IR that is not XML) is UNAVAILABLE with the reason while the rest
load and serve."""
from __future__ import annotations

import numpy as np

from device_daemons.serving.manager import ModelManager
from device_daemons.serving.repository import ModelRepository


def test_a_damaged_ir_at_start_leaves_the_others_loading_and_serving(serving_models, direct_ie, tmp_path):
    _, repo = serving_models
    manager = ModelManager(ModelRepository(repo, str(tmp_path / "cache")), direct_ie)
    try:
        manager.load_all(["damaged", "tiny"])  # (the damaged one first: the next one still loads)
        states = {e["name"]: (e.get("state"), e.get("reason", "")) for e in manager.index()
                  if e["name"] in ("damaged", "tiny")}
        assert states["tiny"] == ("READY", "")
        assert states["damaged"][0] == "UNAVAILABLE" and "not well-formed XML" in states["damaged"][1]
        assert not manager.ready()  # a model asked for at start is missing
        x = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)
        _, outputs, _ = manager.infer("tiny", "", {"data": x}, None)
        assert outputs["prob"].shape == (1, 10)
    finally:
        manager.close()


def test_no_model_or_version_is_left_loading_for_ever(serving_models, direct_ie, tmp_path):
    """A conversion cache that cannot be used (a file there) is a load error naming it, the
    version UNAVAILABLE (it stayed LOADING, the error a 500 with a traceback); a name that is
    not one is UNAVAILABLE too; while loading, a model is one index entry, not two."""
    import pytest
    from device_daemons.serving.errors import ServingError
    _, repo = serving_models
    (tmp_path / "cache").write_text("a file, not a directory")
    manager = ModelManager(ModelRepository(repo, str(tmp_path / "cache")), direct_ie)
    try:
        manager.load_all(["two_input", "bad name"])  # two_input: a Caffe model, converted on load
        index = {(e["name"], e.get("version")): (e.get("state"), e.get("reason", "")) for e in manager.index()
                 if e["name"] in ("two_input", "bad name")}
        assert set(index) == {("two_input", "1"), ("bad name", None)}, index
        state, reason = index[("two_input", "1")]
        assert state == "UNAVAILABLE" and "the conversion cache" in reason and "--cache-dir" in reason
        assert index[("bad name", None)][0] == "UNAVAILABLE"
        with pytest.raises(ServingError) as err:
            manager.load("two_input")
        assert err.value.status == 400 and "cannot be used" in err.value.message
        manager._set_state("tiny", None, "LOADING", "")  # as load_all marks it, then the load's first step:
        manager._loading("tiny", 1)
        seen = [e for e in manager.index() if e["name"] == "tiny"]
        assert seen == [{"name": "tiny", "version": "1", "state": "LOADING"}], seen
    finally:
        manager.close()
