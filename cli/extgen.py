"""`mo-core extgen`: the Model Extension Generator.

    mo-core extgen new --mo-op --mo-caffe-ext --ie-cpu-ext [--mo-tf-ext] [--ie-gpu-ext] [--one-file]
                       [--output_dir DIR]             interactive: asks what it needs
    mo-core extgen new mo-op mo-caffe-ext DIR          the same, in the reference guide's spelling
    mo-core extgen config.extgen.json                  silent: everything from the file
                                                       (cli/config.extgen.json.example)

Both modes make the same configuration (cli/extgen_spec.py) and write the same files
(cli/extgen_render.py); existing files are never overwritten.
"""
from __future__ import annotations

import os

from core.errors import Error

_WORDS = {"mo-op": "mo_op", "mo-caffe-ext": "mo_caffe_ext", "mo-tf-ext": "mo_tf_ext", "ie-cpu-ext": "ie_cpu_ext",
          "ie-gpu-ext": "ie_gpu_ext"}
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.extgen.json.example")


def add_parser(sub):
    p = sub.add_parser("extgen", help="generate extension templates (Model Optimizer ops/extractors, CPU/GPU kernels)",
                       description="Model Extension Generator: `new` asks questions (interactive mode); a "
                                   "config.extgen.json argument reads the answers from it (silent mode, see "
                                   "{}).".format(EXAMPLE))
    p.add_argument("mode", metavar="new|CONFIG.json", help="`new` for the interactive mode, or a configuration file")
    p.add_argument("words", nargs="*", metavar="COMPONENT", help="components as the guide writes them (mo-op "
                   "mo-caffe-ext mo-tf-ext ie-cpu-ext ie-gpu-ext), then optionally an output directory")
    g = p.add_argument_group("components (interactive mode)")
    g.add_argument("--mo-op", action="store_true", help="generate a Model Optimizer operation")
    g.add_argument("--mo-caffe-ext", action="store_true", help="generate a Model Optimizer Caffe extractor")
    g.add_argument("--mo-tf-ext", action="store_true", help="generate a Model Optimizer TensorFlow extractor")
    g.add_argument("--ie-cpu-ext", action="store_true", help="generate a CPU kernel (Python, for -l)")
    g.add_argument("--ie-gpu-ext", action="store_true", help="generate a GPU kernel (.cl + .xml in the GPU plugin's custom layer format)")
    g.add_argument("--one-file", action="store_true",
                   help="put the extractor, the operation and the CPU kernel in one Python file (given to both "
                        "--extensions and -l)")
    g.add_argument("--output_dir", help="where to write (default: the current directory)")
    p.set_defaults(func=run)


def run(args) -> int:
    from cli.extgen_spec import load_config, parse_spec
    if args.mode == "new":
        components = {key: getattr(args, key) for key in _WORDS.values()}
        output_dir = args.output_dir
        for word in args.words:
            if word in _WORDS:
                components[_WORDS[word]] = True
            elif output_dir is None:
                output_dir = word
            else:
                raise Error("extgen new: '{}' is not a component ({}) and the output directory is '{}' already.",
                            word, ", ".join(_WORDS), output_dir)
        if not any(components.values()):
            raise Error("extgen new: name at least one component to generate: --mo-op, --mo-caffe-ext, "
                        "--mo-tf-ext, --ie-cpu-ext, --ie-gpu-ext (see mo-core extgen --help).")
        from cli.extgen_questions import Asker, ask_config
        config = ask_config(components, output_dir, args.one_file, Asker())
        spec = parse_spec(config, "(interactive answers)")
    else:
        given = [w for w in args.words] + ["--" + k.replace("_", "-") for k in _WORDS.values() if getattr(args, k)]
        if given or args.one_file or args.output_dir:
            raise Error("extgen: with a configuration file ({}) everything comes from the file; remove {}.",
                        args.mode, " ".join(given) or "--one-file/--output_dir")
        spec = load_config(args.mode)
    written, fill = generate(spec)
    print()
    for path in written:
        print("[ SUCCESS ] Generated {}".format(path))
    if fill:
        print("\nWhat to write (the FILL IN blocks):")
        for path, line, what in fill:
            print("  {}:{}: {}".format(os.path.join(spec.output_dir, path), line, what))
    return 0


def generate(spec) -> tuple[list[str], list]:
    """Writes the files; returns their paths and the FILL IN blocks. Nothing is written
    if a file other than an empty package __init__.py exists already."""
    from cli.extgen_render import fill_ins, render
    files = render(spec)
    taken = [p for p, text in files.items()
             if os.path.exists(os.path.join(spec.output_dir, p)) and not (p.endswith("__init__.py") and not text)]
    if taken:
        raise Error("extgen: {} exist(s) already in '{}': nothing was written. Remove the file(s) or choose another "
                    "output directory.", ", ".join(taken), spec.output_dir)
    written = []
    try:
        for rel, text in files.items():
            path = os.path.join(spec.output_dir, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if os.path.exists(path):
                continue
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            written.append(path)
    except OSError as exc:
        raise Error("extgen: cannot write into '{}': {}.", spec.output_dir, exc.strerror or exc) from None
    return written, fill_ins(files)
