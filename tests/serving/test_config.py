"""config.json read strictly (config.py), and what the Ray mode makes of it
(ray_mode.deployment_options): unit tests beside the real servers of the other files."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from core.errors import Error
from device_daemons.serving.config import Autoscaling, parse_config, read_config
from tests.support import REPO, env_without


def test_defaults_without_a_config(tmp_path):
    config = read_config(str(tmp_path))
    assert config.device == "CPU" and config.max_batch_size == 0 and not config.dynamic_batching
    assert config.loaded_batches() == (0,) and config.versions == "latest" and config.replicas == 1


def test_batch_sizes_and_dynamic_batching():
    config = parse_config({"max_batch_size": 6, "dynamic_batching": {"max_queue_delay_microseconds": 100},
                           "instance_count": 2}, "c.json")
    assert config.loaded_batches() == (1, 2, 4, 6) and config.max_queue_delay_us == 100
    assert parse_config({"max_batch_size": 8, "batch_sizes": [4, 1]}, "c.json").loaded_batches() == (1, 4, 8)


@pytest.mark.parametrize("raw, words", [
    ({"max_batch": 4}, "unknown key 'max_batch'"),
    ({"max_batch_size": -1}, "'max_batch_size' must be an integer from 0 to 1024"),
    ({"max_batch_size": True}, "'max_batch_size' must be an integer"),
    ({"dynamic_batching": {}}, "needs 'max_batch_size' > 0"),
    ({"max_batch_size": 4, "dynamic_batching": {"delay": 1}}, "unknown key 'delay' in 'dynamic_batching'"),
    ({"batch_sizes": [2]}, "needs 'max_batch_size' > 0"),
    ({"inputs": [{"name": "x", "datatype": "BYTES"}]}, "'inputs[0].datatype' must be one of"),
    ({"inputs": {"name": "x"}}, "'inputs' must be a list"),
    ({"versions": "newest"}, """'versions' must be "latest", "all" or a list"""),
    ({"convert_args": "--scale 2"}, "'convert_args' must be a list of strings"),
    ({"plugin_config": ["f32"]}, "'plugin_config' must be an object of device settings"),
    ({"replicas": {"min": 3, "max": 2}}, "'replicas.max' must be an integer from 3"),
    ({"resources": {"num_gpus": -1}}, "'resources.num_gpus' must be a number"),
    ({"device": ""}, "'device' must be a device name"),
    ({"inputs": [{"name": "a", "ir_name": "data"}, {"name": "b", "ir_name": "data"}]},
     "'inputs[1].ir_name' 'data' is given twice"),
    ({"outputs": [{"name": "p"}, {"name": "p", "ir_name": "q"}]}, "'outputs[1].name' 'p' is given twice"),
    # what the repository sets itself: the IR would be written outside the cache
    ({"convert_args": ["--output_dir", "/tmp/x"]}, "may not give --output_dir (--output_dir)"),
    ({"convert_args": ["-n", "other"]}, "may not give -n (--model_name)"),
    ({"convert_args": ["--model_na=other"]}, "may not give --model_na (--model_name)"),
    ({"convert_args": ["--input_model", "x.pb"]}, "may not give --input_model"),
])
def test_mistakes_name_the_file_and_the_key(raw, words):
    with pytest.raises(Error) as exc:
        parse_config(raw, "models/m/config.json")
    assert str(exc.value).startswith("models/m/config.json: ") and words in str(exc.value)


def test_a_config_that_is_not_json_or_too_large(tmp_path):
    (tmp_path / "config.json").write_text("{'single': quotes}")
    with pytest.raises(Error, match="is not valid JSON"):
        read_config(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"convert_args": ["x" * 70000]}))
    with pytest.raises(Error, match="larger than 64 KiB"):
        read_config(str(tmp_path))


def test_ray_deployment_options():
    from device_daemons.serving.ray_mode import deployment_options
    fixed = deployment_options(parse_config({"replicas": 3, "resources": {"num_cpus": 0.5}}, "c"), 1, 5.0)
    assert fixed["num_replicas"] == 3 and fixed["ray_actor_options"] == {"num_cpus": 0.5, "num_gpus": 0.0}
    assert "autoscaling_config" not in fixed
    auto = parse_config({"replicas": {"min": 1, "max": 4, "target_ongoing_requests": 2}}, "c")
    assert auto.replicas == Autoscaling(1, 4, 2.0)
    assert deployment_options(auto, 1, 5.0)["autoscaling_config"] == {
        "min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 2.0}
    # a config without "replicas" takes --replicas
    assert deployment_options(parse_config({}, "c"), 2, 5.0)["num_replicas"] == 2


@pytest.mark.parametrize("args,missing,extra", [([], ("fastapi", "uvicorn", "grpc"), "mo-core[serve]"),
                                                (["--ray", "auto"], ("ray",), "mo-core[ray]")])
def test_serve_without_its_packages_says_what_to_install(tmp_path, args, missing, extra):
    """A Python without the serving stack (a plain `pip install mo-core`): one [ ERROR ]
    naming the extra, before anything starts."""
    env = env_without(tmp_path, *missing)
    p = subprocess.run([sys.executable, "-m", "cli", "serve", "--model_repository", str(tmp_path), *args], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and p.stderr.startswith("[ ERROR ]") and extra in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
