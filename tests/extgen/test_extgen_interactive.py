"""extgen's interactive mode driven through a real pseudo-terminal: the reference
tool's questions, answered like a user (including a mistyped line it asks again),
give exactly the files the silent mode makes from the shipped example."""
import os
import pty
import select
import subprocess
import sys
import time

from tests.extgen.conftest import example_config
from tests.extgen.extgen_helpers import tree, write_config
from tests.support import REPO, run_cli

# (what the tool shows, what the user types)
ANSWERS = [
    ("-- Model Optimizer Caffe extractor --\nIs your layer Pythonic? (y/n)", "n"),
    ("Please enter layer name:", "HardSigmoid"),
    ("Please enter the name of the layer's parameter field", "hardsigmoid_param"),
    ("Do you want automatically parse all parameters from the hardsigmoid_param", "n"),
    ("When you finish please enter 'q'", "alpha alpha float"),
    ("", "gamma gamma complex"),
    ("the type must be one of int, float, bool, string, listint, listfloat", "beta beta float\nq"),
    ("Please enter operation name to use with this extractor [HardSigmoid]:", ""),
    ("-- Model Optimizer operation --\nPlease enter operation name [HardSigmoid]:", ""),
    ("Does your operation change shape? (y/n)", "n"),
    ("Do you want to use the same parameters as above (alpha float, beta float)? (y/n)", "n"),
    ("When you finish please enter 'q'", "alpha float 0.2\nbeta float 0.5\nq"),
    ("-- Inference Engine CPU extension --\nPlease enter operation name [HardSigmoid]:", ""),
    ("Do you want to use the same parameters as above (alpha float, beta float)? (y/n)", "maybe"),
    ("Please answer y or n.", "y"),
    ("-- Inference Engine GPU extension --\nPlease enter operation name [HardSigmoid]:", ""),
    ("Do you want to use the same parameters as above (alpha float, beta float)? (y/n)", "y"),
    ("Please enter the number of inputs of the layer [1]:", ""),
]


def drive(argv, answers, timeout=120.0):
    """Runs `python -m cli argv` on a pty, answering each expected text; (exit code, transcript)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the tool, as a user starts it in a terminal
        os.chdir(REPO)
        os.execve(sys.executable, [sys.executable, "-m", "cli", *argv], dict(os.environ, PYTHONPATH=REPO))
    transcript, pos = "", 0
    deadline = time.monotonic() + timeout

    def read_some():
        nonlocal transcript
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                data = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                return False
            if not data:
                return False
            transcript += data.decode("utf-8", "replace").replace("\r\n", "\n")
        return True
    try:
        for expected, answer in answers:
            while expected not in transcript[pos:]:
                assert time.monotonic() < deadline, "no {!r} in:\n{}".format(expected, transcript)
                assert read_some(), "the tool ended before {!r}:\n{}".format(expected, transcript)
            pos = transcript.index(expected, pos) + len(expected)
            for line in answer.split("\n"):
                os.write(fd, (line + "\n").encode())
        while time.monotonic() < deadline and read_some():
            pass
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), transcript


def test_interactive_answers_make_the_same_files_as_the_silent_mode(tmp_path):
    interactive = str(tmp_path / "interactive")
    code, transcript = drive(["extgen", "new", "--mo-op", "--mo-caffe-ext", "--ie-cpu-ext", "--ie-gpu-ext",
                              "--output_dir", interactive], ANSWERS)
    assert code == 0, transcript
    assert "[ SUCCESS ] Generated" in transcript and "What to write (the FILL IN blocks):" in transcript
    silent = str(tmp_path / "silent")
    code, _, err = run_cli("extgen", write_config(tmp_path / "c.json", example_config(output_dir=silent)))
    assert code == 0, err
    ours, theirs = tree(interactive), tree(silent)
    assert sorted(ours) == sorted(theirs) and len(ours) == 10
    for path in ours:
        assert ours[path] == theirs[path], path


def test_the_guides_spelling_of_components_and_an_end_of_input(tmp_path):
    """`extgen new mo-op DIR` (words, as the guide writes them) asks the op's questions; input ending early is
    a clean error that writes nothing."""
    code, transcript = drive(["extgen", "new", "mo-op", str(tmp_path / "out")], [
        ("Please enter operation name:", "Swish"), ("Does your operation change shape? (y/n)", "n"),
        ("When you finish please enter 'q'", "beta float 1.0\nq")])
    assert code == 0, transcript
    assert sorted(tree(str(tmp_path / "out"))) == [
        "user_mo_extensions/__init__.py", "user_mo_extensions/front/__init__.py",
        "user_mo_extensions/front/caffe/__init__.py", "user_mo_extensions/front/tf/__init__.py",
        "user_mo_extensions/ops/__init__.py", "user_mo_extensions/ops/swish.py"]
    proc = subprocess.run([sys.executable, "-m", "cli", "extgen", "new", "mo-op", str(tmp_path / "out2")],
                          input="Swish\n", capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=REPO), timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the input ended before every question was answered" in proc.stderr and "Traceback" not in proc.stderr
    assert not os.path.exists(tmp_path / "out2")
