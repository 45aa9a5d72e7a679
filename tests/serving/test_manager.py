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
