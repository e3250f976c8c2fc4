"""The importable name: ``curate`` from a checkout and from a built wheel, and nothing else top-level.

Edge cases: a user's own top-level ``app`` and ``modules`` packages beside an installed curate (they
must neither shadow curate nor be shadowed), a package folder missing from pyproject's list, and
source that still imports the old top-level names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAPPING = {"app": "curate/app", "modules": "curate/stages", "curate": "curate"}


def _source_files():
    for top in MAPPING:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield top, path


def test_no_source_imports_the_old_top_level_names():
    # one stray "from modules.x import" would load a second copy of a module in a checkout
    # (two registries, two Output classes) and fail outright when installed
    pattern = re.compile(r"^\s*(from|import)\s+(app|modules)(\.|\s|$)", re.M)
    offenders = []
    for folder in ("app", "modules", "curate", "tests", "jobs", "scripts", "docs"):
        for path in (ROOT / folder).rglob("*.py"):
            for m in pattern.finditer(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}: {m.group(0).strip()}")
    assert not offenders


def test_pyproject_lists_every_package_folder():
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(conf["packages"])
    on_disk = set()
    for top, path in _source_files():
        if path.name == "__init__.py":
            rel = path.parent.relative_to(ROOT / top).parts
            on_disk.add(".".join([MAPPING[top].replace("/", "."), *rel]))
    assert listed == on_disk
    assert conf["package-dir"] == {"curate": "curate", "curate.app": "app", "curate.stages": "modules"}


def test_checkout_maps_app_and_stages_onto_the_folders():
    code = ("import curate, curate.stages.stage as o, curate.app.runner as r, sys;"
            "print(o.__file__); print(r.__file__);"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('app', 'modules')))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env=env, check=True).stdout.splitlines()
    assert out[0] == str(ROOT / "modules" / "stage.py")
    assert out[1] == str(ROOT / "app" / "runner.py")
    assert out[2] == "[]"


@pytest.mark.slow
def test_wheel_installs_only_curate_and_imports_beside_a_users_app(tmp_path):
    # built from a copy: setuptools leaves build/ and *.egg-info beside the sources it builds
    src = tmp_path / "src"
    for name in ("app", "modules", "curate"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(wheels), str(src)], check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("curate_llm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"curate", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    expected = {f"{MAPPING[top]}/{path.relative_to(ROOT / top).as_posix()}" for top, path in _source_files()}
    assert expected <= set(names)

    # installed into a folder of its own, beside a user's own top-level app and modules packages
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(target)
    user = tmp_path / "user"
    for name in ("app", "modules"):
        (user / name).mkdir(parents=True)
        (user / name / "__init__.py").write_text(f"WHO = 'user-{name}'\n")
    code = ("import app, modules, curate, curate.stages.registry as reg, curate.app.cli as cli;"
            "print(app.WHO, modules.WHO); print(curate.__file__); print(reg.__file__);"
            "print(len(reg.available()) > 10)")
    # cwd is the user's project (an outside folder, not the checkout); the wheel's folder comes first
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(user)])}
    out = subprocess.run([sys.executable, "-c", code], cwd=user, capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "user-app user-modules"
    assert lines[1] == str(target / "curate" / "__init__.py")
    assert lines[2] == str(target / "curate" / "stages" / "registry.py")
    assert lines[3] == "True"
