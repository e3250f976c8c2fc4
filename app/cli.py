"""``curate``: the command line.

One subcommand per stage (built from the stage's Settings dataclass, so flags and job YAML never
drift), ``curate run JOB.yaml`` for a whole job, and the tools in ``app/commands/`` (verify, merge,
report, bench, ...). Bad usage exits 2 with one line; bad data exits 1 with one line naming the
file and row; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import logging
import os
import sys
import typing
import warnings

from curate.stages.errors import CurateError, SettingsError
from curate.stages.stage import IOSettings, field_types, settings_from_mapping

log = logging.getLogger("curate")

#: commands that are not stages: name -> module under app/commands with add_arguments() and main()
COMMANDS = {
    "verify": "curate.app.commands.verify",
    "merge": "curate.app.commands.merge",
    "erase": "curate.app.commands.erase",
    "report": "curate.app.commands.report",
    "train-classifier": "curate.app.commands.train_classifier",
    "bench": "curate.app.commands.bench",
    "reproduce": "curate.app.commands.reproduce",
    "filters": "curate.app.commands.filters",
    "plan": "curate.app.commands.plan",
}


def version() -> str:
    from importlib import metadata

    try:
        return metadata.version("curate-llm")
    except metadata.PackageNotFoundError:  # a checkout that was never installed
        return "unknown (not installed)"


def plain(doc: str | None) -> str | None:
    """A docstring as terminal text: reStructuredText's ``code`` and :role:`target` markup dropped."""
    import re

    if not doc:
        return doc
    doc = re.sub(r":\w+:`~?([^`]+)`", r"\1", doc)
    return re.sub(r"``([^`]+)``", r"\1", doc)


class _VersionAction(argparse._VersionAction):
    """argparse's --version, asking the package metadata only when it is given (a lookup of every
    installed distribution, 10-40 ms of each run otherwise)."""

    def __call__(self, parser, namespace, values, option_string=None):
        self.version = f"curate {version()}"
        super().__call__(parser, namespace, values, option_string)


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but usage errors are SettingsErrors: one line, exit code 2."""

    def error(self, message):
        if "unrecognized arguments: " in message and "--dry-run" in message.split("unrecognized arguments: ")[1].split():
            message += " (--dry-run checks a job: curate run JOB --dry-run)"
        # the CLI prints "curate: error: ..." already: the top-level parser adds no second "curate:"
        raise SettingsError(message if self.prog == "curate" else f"{self.prog}: {message}")


# --------------------------------------------------------------------------- shared options


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("--cluster", default="auto",
                   help="auto (default: threads for an input of at most 64 MiB when no worker option is given, "
                        "else local), local (a local Dask cluster), mpi (under mpirun/srun), threads (no cluster: "
                        "threads in this process, nothing listens), a scheduler file, or tcp:// / tls://host:port")
    g.add_argument("--workers", type=int, default=None,
                   help="local cluster: worker processes (default: one per core); ignored, with a warning, otherwise")
    g.add_argument("--threads-per-worker", type=int, default=1, help="threads per worker (default 1)")
    g.add_argument("--memory-limit", default=None, help="memory limit per worker, e.g. 4GiB (default: even split)")
    g.add_argument("--dashboard-address", default=None,
                   help="dashboard host:port (default 127.0.0.1:8787 on the scheduler's machine: the dashboard "
                        "has no authentication; ':8787' opens it to the network)")
    g.add_argument("--local-directory", default=None, help="scratch space for workers (spilling)")
    g.add_argument("--interface", default=None,
                   help="mpi: network interface the scheduler and workers listen on, e.g. ib0 (default: the "
                        "one with the default route, else the first that is not loopback)")


def cluster_settings(args):
    from curate.app.cluster import ClusterSettings

    return ClusterSettings(
        mode=args.cluster, workers=args.workers, threads_per_worker=args.threads_per_worker,
        memory_limit=args.memory_limit, dashboard_address=args.dashboard_address,
        local_directory=args.local_directory, interface=args.interface,
    )


def add_settings_arguments(p: argparse.ArgumentParser, cls, title: str, skip=()) -> None:
    """One flag per dataclass field; values stay None unless given, so the dataclass defaults apply."""
    g = p.add_argument_group(title)
    hints = field_types(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip or not f.init:  # init=False fields are derived, not options
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else None
        helptext = f.metadata.get("help", "")
        if default not in (None, "", ()):
            helptext += f" (default: {default if not isinstance(default, tuple) else ','.join(map(str, default))})"
        tp = hints[f.name]
        is_bool = tp is bool or (typing.get_origin(tp) in (typing.Union,) and bool in typing.get_args(tp))
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if is_bool:
            g.add_argument(flag, dest=f"{cls.__name__}.{f.name}", action=argparse.BooleanOptionalAction,
                           default=None, help=helptext)
        else:
            g.add_argument(flag, dest=f"{cls.__name__}.{f.name}", default=None, required=required,
                           choices=f.metadata.get("choices"), nargs=f.metadata.get("nargs"),
                           metavar=None if f.metadata.get("choices") else f.metadata.get("metavar", f.name.upper()),
                           help=helptext)


def collect_settings(args, cls, where: str):
    prefix = f"{cls.__name__}."
    values = {k[len(prefix):]: v for k, v in vars(args).items() if k.startswith(prefix) and v is not None}
    return settings_from_mapping(cls, values, where)


# --------------------------------------------------------------------------- parser


def build_parser(only: str | None = None) -> ArgumentParser:
    """The whole command line; with ``only`` (a command from :func:`command_of`), the top-level parser
    with that one command: the same options, help and errors for it, without importing every stage's
    module and building its options (0.2 CPU-s of every run)."""
    from curate.stages import registry

    parser = ArgumentParser(prog="curate", description="Turn raw text data into Megatron token files, on Dask.")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    if only is not None:
        _add_one(sub, only)
        return parser

    _add_run(sub)
    _add_stages(sub)

    stages = {name: registry.get(name) for name in registry.available()}
    kinds: dict[str, list[str]] = {}
    for name, cls in stages.items():
        words = cls.cli or (name,)
        if len(words) == 2:
            kinds.setdefault(words[0], []).append(words[1])
    groups: dict[str, argparse._SubParsersAction] = {}
    for name, cls in stages.items():
        words = cls.cli or (name,)
        parent = sub
        if len(words) == 2:
            if words[0] not in groups:
                gp = parent.add_parser(words[0], help=f"{words[0]} {'|'.join(kinds[words[0]])}")
                groups[words[0]] = gp.add_subparsers(dest=f"{words[0]}_kind", metavar="KIND",
                                                     parser_class=ArgumentParser, required=True)
            parent = groups[words[0]]
        sp = parent.add_parser(words[-1], help=cls.help or name, description=plain(cls.__doc__),
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        _stage_arguments(sp, name, cls)
        if words != (name,):  # the job YAML's name works as a command too: curate fuzzy_dedup = curate dedup fuzzy
            alias = sub.add_parser(name, description=plain(cls.__doc__),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
            _stage_arguments(alias, name, cls)

    for name, module in COMMANDS.items():
        if registry._exists(module):
            _add_command(sub, name, module)
    return parser


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run a job: a YAML list of stages")
    p.add_argument("job", help="job YAML file")
    p.add_argument("--output", help="output directory (default: the job's 'output')")
    p.add_argument("--force", action="store_true", help="rerun every stage even when its output is up to date")
    p.add_argument("--stop-after", type=int, default=None, metavar="K", help="stop after stage K")
    p.add_argument("--dry-run", action="store_true",
                   help="check the job (settings, inputs, ownership, locks) and print the plan: the stages to run "
                        "and to skip on resume; starts no cluster and writes nothing")
    add_io_overrides(p)
    add_cluster_arguments(p)
    p.set_defaults(handler=cmd_run)


def _add_stages(sub) -> None:
    p = sub.add_parser("stages", help="list every stage with its one-line help and its command")
    p.add_argument("--columns", action="store_true",
                   help="the columns each stage needs, adds and removes (with its default settings)")
    p.set_defaults(handler=cmd_stages)


def _add_command(sub, name: str, module: str) -> None:
    mod = importlib.import_module(module)
    sp = sub.add_parser(name, help=mod.HELP, description=plain(mod.__doc__),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    mod.add_arguments(sp)
    sp.set_defaults(handler=mod.main)


def _add_one(sub, command: str) -> None:
    """The parser of ``command`` alone, as :func:`build_parser` makes it among all the others."""
    from curate.stages import registry

    if command == "run":
        _add_run(sub)
    elif command == "stages":
        _add_stages(sub)
    elif command in COMMANDS:
        _add_command(sub, command, COMMANDS[command])
    else:  # a stage by its registered name: its own command (one word), or the alias of a two-word one
        cls = registry.get(command)
        sp = sub.add_parser(command, help=cls.help or command, description=plain(cls.__doc__),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        _stage_arguments(sp, command, cls)


def command_of(argv: list[str]) -> str | None:
    """The command ``argv`` names when :func:`build_parser` can build its parser alone: ``run``, ``stages``,
    a tool, or a stage by its registered name whose module exists. None for anything else (no command,
    ``--help``, a two-word stage command, a typo that gets a did-you-mean): the whole parser then."""
    from curate.stages import registry

    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        if word in ("--debug",):
            i += 1
        elif "=" not in word and len(word) > 2 and "--log-level".startswith(word):
            i += 2  # --log-level LEVEL (argparse takes an unambiguous prefix of it too)
        elif word.startswith("--log-level="):
            i += 1
        else:  # --help, --version, or an option the whole parser reports
            return None
    if i >= len(argv):
        return None
    word = argv[i]
    if word in ("run", "stages"):
        return word
    if word in COMMANDS:
        return word if registry._exists(COMMANDS[word]) else None
    target = registry.STAGES.get(word)
    if target is None or not registry._exists(target.split(":")[0]):
        return None
    return word


def _stage_arguments(sp, name: str, cls) -> None:
    """A stage command's options: input, output, the stage's settings, input/output, cluster."""
    if cls.takes_input:
        sp.add_argument("--input", nargs="+", required=True, metavar="PATH",
                        help="files, directories or globs")
    sp.add_argument("--output", required=True, help="output directory")
    sp.add_argument("--force", action="store_true", help="rerun even when the output is up to date")
    add_settings_arguments(sp, cls.Settings, f"{name} settings")
    add_settings_arguments(sp, IOSettings, "input/output",
                           skip={f.name for f in dataclasses.fields(cls.Settings)})
    add_cluster_arguments(sp)
    sp.set_defaults(handler=cmd_stage, stage=name)


def add_io_overrides(p) -> None:
    g = p.add_argument_group("input/output (override the job's io:)")
    g.add_argument("--format", choices=("parquet", "jsonl"), default=None)
    g.add_argument("--on-error", choices=("raise", "skip"), default=None)
    g.add_argument("--allow-incomplete", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--blocksize", default=None)


# --------------------------------------------------------------------------- commands


def _shown(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


def cmd_stage(args) -> int:
    from curate.app import runner
    from curate.app.cluster import connect, resolve_auto
    from curate.stages import registry

    cls = registry.get(args.stage)
    settings = collect_settings(args, cls.Settings, args.stage)
    io = collect_settings(args, IOSettings, "io")
    cs = cluster_settings(args)
    inputs = tuple(getattr(args, "input", None) or ())
    runner.preflight_stage(args.stage, settings, inputs, args.output, io)
    cs = resolve_auto(cs, runner.input_bytes(args.stage, inputs, io))
    # the lock is held from before the cluster starts; under MPI only the client rank may take it
    early = cs.mode != "mpi"
    with runner.stage_lock(args.stage, settings, args.output) if early else contextlib.nullcontext(), \
            connect(cs) as client, runner.performance_report(args.output, args.stage, client):
        outcome = runner.run_stage(args.stage, settings, inputs, args.output, io,
                                   compute=runner.make_compute(client), force=args.force, lock=not early)
    print(runner.summary_table([outcome]))
    print(f"curate: output in {_shown(args.output)}")
    return 0


def stage_columns_rows() -> list[tuple[str, str, str, str]]:
    """(stage, needs, adds, removes) of every stage with its default settings; a stage whose columns
    depend on settings it requires says so."""
    from curate.stages import registry

    rows = []
    for name in registry.available():
        cls = registry.get(name)
        cols = None
        for settings in (cls.Settings, lambda: None):
            try:
                cols = cls().columns(settings())
                break
            except Exception:  # required settings (a chain, an expression): they decide
                continue
        if cols is None:
            from curate.stages.stage import Columns

            cols = Columns(cls.needs + ("(per settings)",), cls.adds + ("(per settings)",), cls.removes)
        adds = ("all of: " + ", ".join(cols.makes)) if cols.makes else ", ".join(cols.adds)
        if cols.unknown:
            adds = (adds + "; " if adds else "") + "no dataset columns known before the run"
        rows.append((name, ", ".join(cols.needs) or "-", adds or "-", ", ".join(cols.removes) or "-"))
    return rows


def cmd_stages(args) -> int:
    from curate.stages import registry

    if args.columns:
        rows = [("stage", "needs", "adds", "removes"), *stage_columns_rows()]
        wide = [max(len(r[i]) for r in rows) for i in range(3)]
        print("\n".join(f"{a.ljust(wide[0])}  {b.ljust(wide[1])}  {c.ljust(wide[2])}  {d}" for a, b, c, d in rows))
        return 0

    rows = [(name, "curate " + " ".join(cls.cli or (name,)), cls.help or "")
            for name, cls in ((n, registry.get(n)) for n in registry.available())]
    wide = [max(len(r[i]) for r in rows) for i in range(2)]
    print("\n".join(f"{a.ljust(wide[0])}  {b.ljust(wide[1])}  {c}" for a, b, c in rows))
    print("\njob YAML names a stage by the first column; `curate <command> --help` lists its settings")
    return 0


def cmd_run(args) -> int:
    from curate.app.job import relative_path_hint

    try:
        return _run_job(args)
    except CurateError as e:
        hint = relative_path_hint(args.job) if "no such file" in str(e) or "matches" in str(e) else ""
        if hint:
            e.args = (f"{e}{hint}",)
        raise


def _run_job(args) -> int:
    from curate.app import runner

    overrides = {"format": args.format, "on_error": args.on_error,
                 "allow_incomplete": args.allow_incomplete, "blocksize": args.blocksize}
    job = runner.load_job(args.job, overrides)
    output = args.output or job.output
    if not output:
        raise SettingsError(f"job file {args.job}: no 'output'; pass --output DIR")
    if args.dry_run:
        print(runner.dry_run(job, output, args.stop_after, force=args.force))
        return 0
    outcomes = runner.execute_job(job, output, cluster_settings(args), force=args.force, stop_after=args.stop_after)
    print(runner.summary_table(outcomes))
    print(f"curate: output in {_shown(outcomes[-1].output)}")
    return 0


def _output_of(args) -> str | None:
    """The output a failed command wrote to (--output, else the job file's), to name it in the error."""
    output = getattr(args, "output", None)
    if output is None and getattr(args, "job", None):
        try:
            from curate.app import runner

            output = runner.load_job(args.job).output
        except Exception:  # naming the path is a courtesy; the failure itself is reported anyway
            return None
    return output


def main(argv=None) -> int:
    """The ``curate`` command. Called as the program (``argv`` None), it ends the process itself once
    the run is over: see :func:`curate.app.exit.exit_now`."""
    code = _main(argv)
    # a rank still in MPI exits normally (exit.in_mpi); the client rank has left MPI once the cluster's
    # addresses were exchanged, and then its teardown is only the ~0.6 CPU-s of freeing every object
    from curate.app.exit import exit_now, in_mpi

    if argv is None and not in_mpi():
        exit_now(code)
    return code


def _main(argv) -> int:
    from curate.app import logs
    from curate.app.cluster import NotClientRank, WorldTooSmall

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    args = None
    if debug:  # inherited by local workers: they keep their "Compute Failed" tracebacks (app.cluster)
        os.environ["CURATE_DEBUG"] = "1"
    else:
        # a taken --dashboard-address port: Dask moves the dashboard and warns "Perhaps you already have a
        # cluster running?"; curate prints where the dashboard is anyway
        warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
    try:
        parser = build_parser(command_of(argv))
        args = parser.parse_args(argv)
        logs.setup(args.log_level)
        if not debug:
            from curate.app.errors import hide_dask_tracebacks

            hide_dask_tracebacks()
        if not getattr(args, "handler", None):
            parser.print_help()
            return 2
        from curate.app import signals

        with signals.handled():
            code = int(args.handler(args) or 0)
            signals.check()  # an interrupt a library swallowed: the run did not finish as it says
        return code
    except NotClientRank as e:  # an MPI scheduler or worker rank: 0, or EXIT_CLUSTER_LOST
        return e.exit_code
    except CurateError as e:
        if debug:
            raise
        if isinstance(e, WorldTooSmall) and logs.rank() != 0:
            return e.exit_code
        print(f"curate: error: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (app.signals): one line, the run's finally blocks ran
        from curate.app import signals

        print(signals.message(e), file=sys.stderr, flush=True)
        return signals.exit_code(e)
    except BrokenPipeError:  # `curate report DIR | head`: the reader left; no message, as with any tool
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:  # a bug or an unexpected library failure: one line, the traceback with --debug
        if debug:
            raise
        from curate.app.errors import describe, masked_failure

        first = masked_failure(e)
        if first is not None:
            print(f"curate: error: {first}", file=sys.stderr, flush=True)
            return first.exit_code
        known = describe(e, _output_of(args))
        if known:
            print(f"curate: error: {known}", file=sys.stderr, flush=True)
            return 1
        logging.getLogger("curate").debug("unexpected error", exc_info=True)
        print(f"curate: error: {type(e).__name__}: {e} (rerun with --debug for the traceback)",
              file=sys.stderr, flush=True)
        return 1
    finally:
        # an error's traceback can hold Arrow readers in a reference cycle; left to the interpreter's
        # shutdown, their C++ destructors run after Arrow's thread pool is gone and the process aborts
        # ("terminate called without an active exception", exit 134 instead of the error's code: 1 in 5
        # refused `curate merge` runs)
        import gc

        gc.collect()


if __name__ == "__main__":
    sys.exit(main())
