"""`staticmq doctor`: can a Spark driver started from this Python find `format("staticmq")`?

pyspark registers Python data sources by listing the top-level modules of the sys.path entries
(`pkgutil.iter_modules()` in pyspark/sql/worker/lookup_data_sources.py) and importing each
`pyspark_*` one; it runs that lookup in a Python worker, the interpreter named by PYSPARK_PYTHON
(else `python3` on PATH). A module reachable only through an import hook (an editable install in
setuptools' default mode, for a project laid out without a package root) imports fine but is not
listed. The checks here look the same way, and check the versions the connector needs.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

REGISTRATION_MODULE = "pyspark_staticmq"
# The pyspark range: the lowest release supported, and the first minor release not tested.
PYSPARK_LOWEST = "4.0.0"
PYSPARK_REFUSED = "4.4"
# install_requires of setup.cfg: distribution -> (import name, lowest version, first version refused)
REQUIREMENTS: dict[str, tuple[str, str, str | None]] = {
    "pyarrow": ("pyarrow", "15", None),
    "numpy": ("numpy", "1.26", None),
    "grpcio": ("grpc", "1.64", None),
    "protobuf": ("google.protobuf", "5.26.1", "8"),
}
REGISTER_BY_HAND = (
    "or register it in the session: from staticmq_spark.data_source import StaticMQDataSource; "
    "spark.dataSource.register(StaticMQDataSource) (staticmq_spark.configure_spark does it)"
)


@dataclass(frozen=True, slots=True)
class Finding:
    ok: bool
    what: str
    fix: str = ""


def version_tuple(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version string: "2.4.6" -> (2, 4, 6), "4.2.0.dev1" -> (4, 2, 0)."""
    parts = []
    for part in version.split("."):
        found = re.match(r"\d+", part)
        if found is None:
            break
        parts.append(int(found.group()))
        if found.end() < len(part):
            break
    return tuple(parts)


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_requirements(installed: Any = _installed) -> list[Finding]:
    """The connector's own requirements: installed, in range (a `pip install --no-deps` skips them)."""
    out = []
    for dist, (_module, lowest, refused) in REQUIREMENTS.items():
        version = installed(dist)
        wanted = f">={lowest}" + (f",<{refused}" if refused else "")
        if version is None:
            out.append(Finding(False, f"{dist} is not installed", f'pip install "{dist}{wanted}"'))
        elif version_tuple(version) < version_tuple(lowest) or (
            refused is not None and version_tuple(version) >= version_tuple(refused)
        ):
            out.append(Finding(False, f"{dist} {version} is outside {wanted}", f'pip install "{dist}{wanted}"'))
        else:
            out.append(Finding(True, f"{dist} {version}"))
    return out


def check_pyspark(installed: Any = _installed) -> Finding:
    version = installed("pyspark")
    wanted = f">={PYSPARK_LOWEST},<{PYSPARK_REFUSED}"
    if version is None:
        return Finding(
            False,
            "pyspark is not installed in this Python",
            "pip install 'staticmq[spark]' (on a managed runtime, use this check in the runtime's Python)",
        )
    if not version_tuple(PYSPARK_LOWEST) <= version_tuple(version) < version_tuple(PYSPARK_REFUSED):
        return Finding(
            False,
            f"pyspark {version}: staticmq supports pyspark {wanted} (see docs/deployment.md)",
            f"pip install 'pyspark{wanted}', or use a runtime with Spark 4.0 to 4.3",
        )
    return Finding(True, f"pyspark {version}")


def check_pyspark_features() -> list[Finding]:
    """What the running pyspark lacks of what the connector uses (each degrades as documented)."""
    try:
        from staticmq_spark.session.features import missing_features

        missing = missing_features()
    except Exception as exc:  # an import that fails here fails in Spark too
        return [Finding(False, f"staticmq's pyspark features do not load: {exc!r}", "reinstall pyspark")]
    if not missing:
        return [Finding(True, "this pyspark has everything the connector uses")]
    return [Finding(True, f"this pyspark lacks {feature}") for feature in missing]


def check_listed(path: Iterable[str] | None = None) -> Finding:
    """Whether pyspark's lookup sees `pyspark_staticmq`: listed among the modules of `path`
    (default sys.path) exactly as lookup_data_sources.py lists them."""
    listed = pkgutil.iter_modules(None if path is None else list(path))
    if any(info.name == REGISTRATION_MODULE for info in listed):
        return Finding(True, f"{REGISTRATION_MODULE} is on sys.path: pyspark registers format('staticmq')")
    spec = importlib.util.find_spec(REGISTRATION_MODULE) if path is None else None
    if spec is not None:
        return Finding(
            False,
            f"{REGISTRATION_MODULE} imports (from {spec.origin}) but no sys.path entry lists it: an editable "
            "install through an import hook, which pyspark's data source lookup cannot see",
            "reinstall with pip install -e . --config-settings editable_mode=compat (or pip install .), "
            + REGISTER_BY_HAND,
        )
    return Finding(
        False,
        f"{REGISTRATION_MODULE} is not installed in this Python ({sys.executable})",
        "pip install staticmq (the wheel or the checkout) into the Python Spark runs, " + REGISTER_BY_HAND,
    )


def check_default_source() -> Finding:
    """The module's DefaultSource is a pyspark DataSource named "staticmq" (needs pyspark)."""
    try:
        from pyspark.sql.datasource import DataSource

        module = importlib.import_module(REGISTRATION_MODULE)
        source = module.DefaultSource
        ok = isinstance(source, type) and issubclass(source, DataSource) and source.name() == "staticmq"
    except Exception as exc:  # any failure here is what would break pyspark's lookup too
        return Finding(False, f"importing {REGISTRATION_MODULE} fails: {exc!r}", "reinstall staticmq")
    if not ok:
        return Finding(
            False, f"{REGISTRATION_MODULE}.DefaultSource is not the staticmq data source", "reinstall staticmq"
        )
    return Finding(True, f"{REGISTRATION_MODULE}.DefaultSource is the data source 'staticmq'")


def worker_python() -> str | None:
    """The interpreter Spark starts for Python workers (and its data source lookup), as pyspark
    picks it: PYSPARK_PYTHON, else `python3` on PATH."""
    return shutil.which(os.environ.get("PYSPARK_PYTHON", "python3"))


def check_worker_python(worker: str | None = None, explicit: bool | None = None) -> Finding:
    """Spark's workers run an interpreter of this environment, or (PYSPARK_PYTHON set on purpose)
    one that lists pyspark_staticmq too. A `python3` of another environment found on PATH is the
    usual slip: the driver runs one installation and the lookup and tasks another."""
    worker = worker if worker is not None else worker_python()
    explicit = explicit if explicit is not None else "PYSPARK_PYTHON" in os.environ
    fix = f"export PYSPARK_PYTHON={sys.executable} (or activate this environment) before starting the driver"
    if worker is None:
        named = os.environ.get("PYSPARK_PYTHON", "python3")
        return Finding(
            False, f"no Python for Spark's workers: {named} (PYSPARK_PYTHON, else python3) is not found", fix
        )
    listed = f"any(m.name == {REGISTRATION_MODULE!r} for m in pkgutil.iter_modules())"
    probe = f"import pkgutil, sys; print(sys.prefix); sys.exit(0 if {listed} else 1)"
    try:
        done = subprocess.run([worker, "-c", probe], check=False, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding(False, f"Spark's workers would run {worker}, which does not start: {exc}", fix)
    prefix = done.stdout.strip()
    if os.path.realpath(prefix) == os.path.realpath(sys.prefix):
        return Finding(True, f"Spark's workers run this environment's Python ({worker})")
    if explicit and done.returncode == 0:
        return Finding(True, f"Spark's workers run PYSPARK_PYTHON={worker} (environment {prefix}), which lists it")
    source = "PYSPARK_PYTHON" if explicit else "python3 on PATH, as PYSPARK_PYTHON is unset"
    seen = "lists" if done.returncode == 0 else "does not list"
    return Finding(
        False,
        f"Spark's workers run {worker} ({source}) of another environment ({prefix}), which {seen} "
        f"{REGISTRATION_MODULE}",
        fix,
    )


def run_checks() -> list[Finding]:
    pyspark = check_pyspark()
    findings = [*check_requirements(), pyspark, check_listed()]
    if pyspark.ok:
        findings[-1:-1] = check_pyspark_features()
    if pyspark.ok and findings[-1].ok:
        findings.append(check_default_source())
    findings.append(check_worker_python())
    return findings


def register(sub: Any) -> None:
    p = sub.add_parser(
        "doctor",
        help="check that a Spark driver started from this Python finds format('staticmq'); prints fixes",
        description=(
            "Checks the connector's requirements (pyarrow, numpy, grpcio, protobuf), pyspark's version, whether "
            "pyspark's data source lookup lists the pyspark_staticmq module on sys.path, and whether Spark's "
            "Python workers see it. Exit status 1 if anything is wrong."
        ),
    )
    p.set_defaults(handler=_doctor)


def _doctor(args: argparse.Namespace) -> int:
    findings = run_checks()
    for finding in findings:
        print(f"[{'ok' if finding.ok else 'FAIL'}] {finding.what}")
        if finding.fix:
            print(f"       fix: {finding.fix}")
    bad = sum(not f.ok for f in findings)
    print("staticmq doctor: all checks passed" if not bad else f"staticmq doctor: {bad} problem(s)")
    return 1 if bad else 0
