"""``curate reproduce OUT [--sample K]``: rerun part of every stage from what its manifest recorded, in
a scratch folder, and compare the checksums (:mod:`curate.stages.reproduce`). Exit 1 on any
difference, naming the stage, the file and the library versions that changed since the run."""

from __future__ import annotations

HELP = "rerun K random partitions of each stage in a scratch folder and compare checksums with the manifest"


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="OUT", help="a job root or one stage output")
    p.add_argument("--sample", type=int, default=3, metavar="K",
                   help="partitions (or files, for stages rerun whole) compared per stage; 0: all (default 3)")
    p.add_argument("--seed", type=int, default=0, help="which partitions are drawn (default 0)")
    p.add_argument("--scratch", default=None, metavar="DIR",
                   help="where the reruns write (default: a new temporary folder); never inside OUT")
    p.add_argument("--keep-scratch", action="store_true", help="keep the scratch folder for a look")
    p.add_argument("--stage-class", action="append", default=[], metavar="MODULE:CLASS",
                   help="a stage or filter of your own to rerun (repeatable); only registered stages and filters "
                        "and the classes named here are imported: code a manifest names never is")


def main(args) -> int:
    from curate.stages import registry

    with registry.only_named(args.stage_class):
        return _reproduce(args)


def _reproduce(args) -> int:
    import os
    import tempfile

    from curate.stages.errors import SettingsError
    from curate.stages.output import check_not_input
    from curate.stages.reproduce import check_stage, stage_class, stage_outputs

    if args.sample < 0:
        raise SettingsError(f"--sample must be 0 or more; got {args.sample}")
    folders = stage_outputs(args.dir)
    for folder in folders:  # every stage known before any rerun: refusals come first
        stage_class(folder, args.stage_class)
    scratch = args.scratch or tempfile.mkdtemp(prefix="curate-reproduce-")
    check_not_input(scratch, [args.dir], flag="--scratch")
    failed = False
    try:
        for k, folder in enumerate(folders):
            check = check_stage(folder, args.sample, args.seed, os.path.join(scratch, f"{k:02d}"),
                                allowed=args.stage_class)
            status = "identical" if check.ok else "DIFFERS"
            print(f"{check.folder}  {check.stage}  {check.how or '-'}: {check.compared} file(s) compared, {status}")
            for problem in check.problems:
                print(f"  {problem}")
            for path, then, now in check.differences:
                print(f"  {path}: recorded {then}, now {now}")
            if not check.ok and check.erasures:  # a rerun from the inputs brings erased documents back
                for e in check.erasures:
                    print(f"  erased since the run: {e.get('documents', '?')} document(s) by {e.get('by', '?')} at "
                          f"{e.get('at', '?')} (request sha256 {str(e.get('request_sha256', '?'))[:16]}...): "
                          "files holding them are expected to differ")
            if not check.ok and check.versions:
                shown = ", ".join(f"{k} {a or '-'} -> {b or '-'}" for k, (a, b) in check.versions.items())
                print(f"  versions changed since the run: {shown}")
            failed |= not check.ok
    finally:
        if args.keep_scratch:
            print(f"scratch kept in {scratch}")
        else:  # only what the reruns wrote, through the output that wrote it
            from curate.stages.output import Output

            for k in range(len(folders)):
                folder = os.path.join(scratch, f"{k:02d}")
                if os.path.isdir(folder):
                    Output.at(folder).discard()
            if not args.scratch and not os.listdir(scratch):
                os.rmdir(scratch)  # the empty temporary folder made above
    print(f"curate reproduce: {args.dir}: {'differences found' if failed else 'every compared file is identical'}")
    return 1 if failed else 0
