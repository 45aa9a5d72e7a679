"""`mo-core` command line: subcommands share one error policy (cli/errors.py)."""
import argparse
import sys

from cli import convert
from cli import benchmark, daemon, extgen, infer, serve, tune
from cli.errors import run_reporting_errors


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        # no prefixes of long options: benchmark_app's -i or -nt must not silently become -infer_precision or
        # -nthreads, nor -hint "-h int"
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def _get_option_tuples(self, option_string):
        # allow_abbrev covers '--' options only: a single-dash word ('-nt') still matched a longer option by
        # prefix; only a one-letter option with its value attached ('-b4') stays
        tuples = super()._get_option_tuples(option_string)
        return tuples if option_string.startswith("--") else [t for t in tuples if len(t[1]) == 2]

    def error(self, message):  # argparse's own exit code 2 becomes our 1, with the [ ERROR ] prefix
        # (one line of usage: convert's full usage is 30 lines above the one that matters)
        print("usage: {} ... ({} --help lists the options)".format(self.prog, self.prog), file=sys.stderr)
        print("[ ERROR ]  {}: {}".format(self.prog, message), file=sys.stderr)
        sys.exit(1)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mo-core", description="Model optimizer and inference runtime (IR v2).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    convert.add_parser(sub)
    daemon.add_parser(sub)
    infer.add_parser(sub)
    benchmark.add_parser(sub)
    extgen.add_parser(sub)
    tune.add_parser(sub)
    serve.add_parser(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run_reporting_errors(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
