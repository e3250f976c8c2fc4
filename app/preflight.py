"""Every refusal a run can meet, before any cluster starts or any file is touched, and the plan.

A stage run is refused for a missing input, an output that is a file or lies inside an input, a live
lock, an output curate does not own, or a chain of stages whose columns do not fit together
(:mod:`curate.stages.columns`). A job's plan puts stage k in ``<output>/<kk>-<stage>/`` reading stage
k-1's output; ``curate run --dry-run`` (:func:`dry_run`) shows that plan and what a run would skip as
up to date, with nothing started and nothing written.
"""

from __future__ import annotations

import os

from curate.app.job import Job, StageSpec
from curate.stages import dataset, output as output_mod, registry
from curate.stages.errors import SettingsError
from curate.stages.paths import glob_paths
from curate.stages.stage import IOSettings, fingerprint, settings_files


def stage_dir(output: str, k: int, name: str) -> str:
    if ":" in name:  # a user's own stage, module:Class: its folder takes the class's name
        name = registry.get(name).name
    return os.path.join(output, f"{k:02d}-{name}")


def check_inputs(name: str, inputs, io: IOSettings) -> None:
    """Fail before any cluster starts when an input is missing (SettingsError naming it)."""
    cls = registry.get(name)
    if not cls.takes_input:
        return
    if not inputs:
        raise SettingsError(f"stage {name}: no input")
    if cls.reads_raw_files:
        for spec in inputs:
            if "://" not in spec and not os.path.exists(spec) and not glob_paths(spec):
                raise SettingsError(f"input {spec}: no such file or directory")
    else:
        dataset.expand_inputs(inputs, allow_incomplete=io.allow_incomplete)


def check_output_path(output: str) -> None:
    """An output is a folder: a regular file (or anything else) there is the user's, and refused; so
    is one that cannot be made, below a file or where nothing can be written (else the first mkdir
    failed with a raw NotADirectoryError or PermissionError, after the dry run had passed it)."""
    if "://" in output:
        return
    if os.path.lexists(output) and not os.path.isdir(output):
        raise SettingsError(f"--output {output}: exists and is not a directory")
    there = os.path.abspath(output)
    while not os.path.lexists(there):  # the nearest existing folder: where the run's first mkdir happens
        there = os.path.dirname(there)
    if not os.path.isdir(there):
        what = "a file, not a directory" if os.path.isfile(there) else "not a directory"
        raise SettingsError(f"--output {output}: {there} is {what}")
    kernel = _kernel_filesystem(there)
    if kernel is not None:
        raise SettingsError(f"--output {output}: nothing can be created in {there} (a {kernel} filesystem, "
                            "the kernel's own)")
    if not os.access(there, os.W_OK | os.X_OK):
        raise SettingsError(f"--output {output}: {there} is not writable")


#: filesystems that are the kernel's interface, where a folder cannot be made (root's os.access says
#: yes all the same)
_KERNEL_FILESYSTEMS = {"proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "configfs",
                       "pstore", "efivarfs", "devpts", "bpf", "fusectl", "binfmt_misc"}


def _kernel_filesystem(path: str) -> str | None:
    """The type of the filesystem holding ``path`` when it is one of the kernel's, from /proc/self/mounts."""
    try:
        with open("/proc/self/mounts", encoding="utf-8") as f:
            mounts = [line.split()[1:3] for line in f]
    except OSError:  # not Linux
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for point, fstype in (m for m in mounts if len(m) == 2):
        point = point.replace("\\040", " ")
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, fstype
    return kind if kind in _KERNEL_FILESYSTEMS else None


def stage_owner(name: str, job: str | None = None) -> dict:
    return {"kind": "stage", "stage": name, "job": job}


def job_owner(job: Job) -> dict:
    return {"kind": "job", "job": job.name}


def unit_of(name: str, settings) -> str:
    """The ownership unit a stage writes in its directory: tokenize's --prefix, else the whole directory."""
    prefix = getattr(settings, "prefix", "part") if name == "tokenize" else "part"
    return "" if prefix == "part" else prefix


def preflight_stage(name: str, settings, inputs, output: str, io: IOSettings, job: str | None = None,
                    check_locks: bool = True) -> None:
    """Every refusal a stage run can meet, before any cluster starts or any file is touched:
    missing inputs, an output that is (inside) an input, a live lock, an output curate does not own
    (the lock first: a run in progress explains its own files)."""
    check_output_path(output)
    check_inputs(name, inputs, io)
    if not registry.get(name).reads_raw_files and registry.get(name).takes_input:
        from curate.stages.dataset.input_check import check_columns

        check_columns(inputs, io)
        check_reserved(inputs, io)
    registry.get(name)().check(settings, tuple(inputs))
    output_mod.check_not_input(output, inputs)
    registry.get(name)().check_output(settings, tuple(inputs), output)
    out = output_mod.Output.at(output, unit_of(name, settings))
    if check_locks and not out.remote:
        output_mod.Lock(out)._check_others()
    output_mod.check_claim(out, stage_owner(name, job))


def job_plan(job: Job, output: str, stop_after: int | None = None) -> list[tuple[int, StageSpec, tuple, str]]:
    """(k, stage, inputs, output directory) of every stage the job runs."""
    plan, previous_output = [], None
    for k, spec in enumerate(job.stages, start=1):
        inputs = spec.input or (job.input if k == 1 else (previous_output,))
        out = stage_dir(output, k, spec.name)
        plan.append((k, spec, tuple(inputs), out))
        previous_output = out
        if stop_after is not None and k >= stop_after:
            break
    return plan


def preflight_job(job: Job, output: str, stop_after: int | None = None, check_locks: bool = True) -> None:
    """The job's refusals before any work: the first stage's inputs, the root and every stage output."""
    root = output_mod.Output.at(output)
    plan = job_plan(job, output, stop_after)
    first_inputs = plan[0][2]
    check_output_path(output)
    check_inputs(plan[0][1].name, first_inputs, job.io)
    if not registry.get(plan[0][1].name).reads_raw_files and registry.get(plan[0][1].name).takes_input:
        from curate.stages.dataset.input_check import check_columns

        check_columns(first_inputs, job.io)
    check_kinds(job, plan)
    for _k, spec, inputs, out in plan:  # a stage whose inputs exist already (the first, or given its own)
        if not any(_is_stage_dir(i, plan) for i in inputs):
            cls = registry.get(spec.name)
            if cls.takes_input and not cls.reads_raw_files:
                check_reserved(inputs, job.io)
            cls().check(spec.settings, tuple(inputs))
        registry.get(spec.name)().check_output(spec.settings, tuple(inputs), out)
    check_columns_of(job, plan)
    output_mod.check_not_input(output, [i for _, _, inputs, out in plan for i in inputs
                                        if os.path.abspath(i) != os.path.abspath(out) and not _is_stage_dir(i, plan)])
    if check_locks and not root.remote:  # first: a stage command writing a stage folder is named as such
        output_mod.Lock(root)._check_others()
    output_mod.check_claim(root, job_owner(job))
    for _k, spec, _inputs, out in plan:
        output_mod.check_claim(output_mod.Output.at(out, unit_of(spec.name, spec.settings)),
                               stage_owner(spec.name, job.name))


def check_reserved(inputs, io: IOSettings) -> None:
    """An input with a column named like curate's own (``_reason``, ``_detail``, ``__offset``) is
    refused before any work, naming the file and the rename (the readers refuse it too, for a key
    that first appears after the records sampled here)."""
    from curate.stages.dataset.checks import reserved_problem
    from curate.stages.select.schema import input_schema

    for spec in inputs:
        try:
            got = input_schema(str(spec))
        except Exception:  # a missing or broken input has its own refusal, naming it
            continue
        if got is not None and (problem := reserved_problem(got[0], io)) is not None:
            raise SettingsError(f"{got[1]}: reserved_column: {problem}")


def check_kinds(job: Job, plan) -> None:
    """Each stage of the job can read what the stage before it writes (:attr:`Stage.reads`,
    :attr:`Stage.writes`), and its check passes against what that stage will write when it says so
    before running (:meth:`Stage.planned_output`: tokenize's vocabulary for pack's ids). Else the
    real run failed only once the earlier stages had run, and with another stage's words (a clean
    after tokenize: ``missing_text ... --text-field``)."""
    from curate.stages.stage import KINDS, Stage

    written: dict[str, tuple] = {}  # stage folder -> (k, stage, settings, the kind it will hold)
    planned: dict[int, object] = {}
    for k, spec, inputs, out in plan:
        stage = registry.get(spec.name)()
        label = f"job file {job.source}: stage {k} ({spec.name})"
        read = None
        for source in inputs:
            if os.path.abspath(source) not in written:
                continue
            j, before, before_settings, kind = written[os.path.abspath(source)]
            if kind is None:  # not known before the run: the stage's own check, once it exists
                continue
            if _silent(stage, "reads"):
                continue
            if kind not in stage.reads:
                raise SettingsError(f"{label} reads {' or '.join(KINDS.get(r, r) for r in stage.reads)}, but stage {j} "
                                    f"({before.name}) writes {KINDS.get(kind, kind)}: {_kind_hint(stage, kind, j, before)}")
            read = kind
            if type(stage).check_planned_input is not Stage.check_planned_input:
                if j not in planned:
                    planned[j] = before.planned_output(before_settings)
                try:
                    stage.check_planned_input(spec.settings, planned[j])
                except SettingsError as e:
                    raise SettingsError(f"{label}: {e}") from None
        kind = stage.output_kind(spec.settings, read)
        if _silent(stage, "writes") and _silent(stage, "output_kind"):
            kind = None
        written[os.path.abspath(out)] = (k, stage, spec.settings, kind)


def _silent(stage, attr: str) -> bool:
    """A stage of the user's (``module:Class``) that reads raw files of its own kind and does not set
    ``attr``: what it reads or writes is not known, and not checked (curate's own stages are right by
    default or set it)."""
    from curate.stages.stage import Stage

    if not stage.reads_raw_files or type(stage).__module__.startswith("curate.stages."):
        return False
    return not any(attr in vars(c) for c in type(stage).__mro__ if c not in (Stage, object))


def _kind_hint(stage, kind: str, j: int, before) -> str:
    if "files" in stage.reads:
        return f"make {stage.name} the first stage, or give it an input of its own"
    if "tokens" in stage.reads and kind == "documents":
        return f"put {stage.name} after tokenize"
    return f"put {stage.name} before {before.name}" if kind == "tokens" else \
        f"put {stage.name} before stage {j} ({before.name})"


def check_columns_of(job: Job, plan) -> None:
    """The job's chain of stages fits together (:mod:`curate.stages.columns`): a stage needing a column
    that neither the input nor an earlier stage provides is refused before any work."""
    from curate.stages.columns import check_chain, input_columns

    k0, first, inputs, _out = plan[0]
    schema = None
    if not registry.get(first.name).reads_raw_files and registry.get(first.name).takes_input and \
            not any(_is_stage_dir(i, plan) for i in inputs):
        schema = input_columns(inputs)
        if schema is not None and (job.io.text_field, job.io.id_field) != ("text", "id"):
            schema |= {"text", "id"}  # the reader renames them
    steps = [(f"job file {job.source}: stage {k} ({spec.name})", registry.get(spec.name), spec.settings)
             for k, spec, _i, _o in plan]
    check_chain(steps, schema)


def stage_io(io: IOSettings, inputs, plan) -> IOSettings:
    """The input/output settings of a job's stage: the job's, but a stage reading an earlier stage's
    output reads curate's own columns (``text``, ``id``), whatever the job's input called them."""
    import dataclasses

    if any(_is_stage_dir(i, plan) for i in inputs) and (io.text_field, io.id_field) != ("text", "id"):
        return dataclasses.replace(io, text_field="text", id_field="id")
    return io


def _is_stage_dir(path: str, plan) -> bool:
    return any(os.path.abspath(path) == os.path.abspath(out) for _, _, _, out in plan)


def dry_run(job: Job, output: str, stop_after: int | None = None, force: bool = False) -> str:
    """``curate run --dry-run``: every refusal of a real run (settings were checked when the job was
    loaded), then the plan as a table: each stage, its inputs and whether a run would do it or skip it
    as up to date. No cluster, nothing written. A stage after one that reruns is judged by the
    fingerprint that stage will have, so the plan says what the run will really do."""
    preflight_job(job, output, stop_after)
    planned: dict[str, str] = {}  # stage folder -> the fingerprint its output will have
    rows = [("#", "stage", "folder", "input", "plan")]
    stages = job_plan(job, output, stop_after)
    for k, spec, inputs, out in stages:
        identity = []
        for spec_in in inputs:
            key = os.path.abspath(spec_in)
            identity += [{"dataset": planned[key]}] if key in planned else dataset.input_identity([spec_in], job.io.allow_incomplete)
        fp = fingerprint(spec.name, spec.settings, identity + dataset.input_identity(settings_files(spec.settings)),
                         stage_io(job.io, inputs, stages))
        planned[os.path.abspath(out)] = fp
        unit = output_mod.Output.at(out, unit_of(spec.name, spec.settings))
        manifest = unit.manifest() if unit.exists() else None
        if force:
            plan = "run (--force)"
        elif manifest is None:
            plan = "run"
        elif not unit.complete():
            plan = "run (resume an unfinished output)"
        elif unit.missing(manifest):
            gone = unit.missing(manifest)
            plan = f"run again ({len(gone)} listed file(s) missing: {gone[0]})"
        elif manifest.get("fingerprint") == fp:
            plan = "skip (up to date)"
        else:
            plan = "run (settings or inputs changed)"
        shown_inputs = ", ".join(os.path.basename(i) if _is_stage_dir(i, job_plan(job, output)) else i for i in inputs)
        rows.append((str(k), spec.name, os.path.basename(out), shown_inputs or "-", plan))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return f"curate: job {job.name} -> {output}: checked; nothing started, nothing written\n" + "\n".join(lines)
