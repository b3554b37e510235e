"""Python environments that look like managed Spark runtimes, for the pyspark matrix (tests/matrix).

Each holds one pyspark and the packages a runtime pins beside it (older grpcio, protobuf, pyarrow,
numpy, pandas than the primary environment's), like Databricks' and EMR's base images. The
environments are built once per machine under `<cache>/pyspark-envs/` (`$STATICMQ_CACHE`, else
`~/.cache/staticmq`), pyspark's ~430 MB source archives through pip's own cache; an environment
whose recipe changed is built anew. Every run then installs the connector's wheel into it as a user
would (`pip install staticmq.whl`) and checks that the install changed none of those packages and
left `pip check` clean.

    python -m tests.support.pyspark_envs 4.0.0     # build (or find) one, print its python
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from staticmq_spark.local_clusters.jvm_artifacts import cache_root


@dataclass(frozen=True)
class Runtime:
    """A pyspark release and the packages a runtime with it pins."""

    pyspark: str
    pins: tuple[str, ...]
    where: str  # which managed runtimes this stands for


# The 4.0 environment is the oldest set of all (grpcio 1.67, protobuf 5.29, pyarrow 15, numpy
# 1.26). pyspark 4.1 and later require grpcio >= 1.76 for their Spark Connect client, whose
# generated code needs protobuf >= 6.33.0 (4.1.1) and >= 6.33.5 (4.3.0): their environments pin those.
RUNTIMES = {
    "4.0.0": Runtime(
        "4.0.0",
        (
            "grpcio==1.67.0",
            "grpcio-status==1.67.0",
            "protobuf==5.29.4",
            "googleapis-common-protos==1.65.0",
            "pyarrow==15.0.2",
            "numpy==1.26.4",
            "pandas==2.2.3",
        ),
        "Databricks Runtime 17.3 LTS, EMR 8.0, Dataproc 3.0 (Spark 4.0)",
    ),
    "4.1.1": Runtime(
        "4.1.1",
        (
            "grpcio==1.76.0",
            "grpcio-status==1.76.0",
            "protobuf==6.33.0",
            "googleapis-common-protos==1.71.0",
            "zstandard==0.25.0",
            "pyarrow==21.0.0",
            "numpy==2.1.3",
            "pandas==2.2.3",
        ),
        "Databricks Runtime 18, EMR 8.1, Fabric Runtime 2.0, Glue 6.0 (Spark 4.1)",
    ),
    "4.3.0": Runtime(
        "4.3.0",
        (
            "grpcio==1.76.0",
            "grpcio-status==1.76.0",
            "protobuf==6.33.5",
            "googleapis-common-protos==1.71.0",
            "zstandard==0.25.0",
            "pyarrow==21.0.0",
            "numpy==2.1.3",
            "pandas==2.2.3",
        ),
        "the newest Spark (4.3)",
    ),
}

# What the tests need beyond the runtime (the broker's extra, the test tools); none of these may
# move a runtime package either (checked like the wheel).
TEST_TOOLS = (
    "pytest>=8",
    "pytest-timeout>=2.3",
    "hypothesis>=6.100",
    "mmh3>=4",
    "chispa>=0.10",
    "build>=1.2",
    "pyyaml>=6",
    "prometheus_client>=0.20",
    "cryptography>=42",
    "tqdm>=4.60",
)
MARKER = "runtime.json"


class EnvironmentError_(RuntimeError):
    pass


def _run(command: list[str], timeout: float = 1800) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise EnvironmentError_(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return done.stdout


def _recipe(runtime: Runtime) -> str:
    text = json.dumps({"pyspark": runtime.pyspark, "pins": runtime.pins, "tools": TEST_TOOLS, "python": sys.version})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def env_dir(version: str) -> Path:
    return cache_root() / "pyspark-envs" / f"pyspark-{version}"


def python_of(env: Path) -> Path:
    return env / "bin" / "python"


def frozen(python: Path) -> dict[str, str]:
    """Installed distributions and versions (`pip freeze`, names normalized; staticmq left out)."""
    out = _run([str(python), "-m", "pip", "freeze", "--all"])
    packages = {}
    for line in out.splitlines():
        name, sep, version = line.partition("==")
        if not sep:
            name, _, version = line.partition(" @ ")
        key = name.strip().lower().replace("_", "-")
        if key and key != "staticmq":
            packages[key] = version.strip()
    return packages


def ensure_runtime(version: str) -> Path:
    """The runtime environment of `version`, built if missing or built from another recipe."""
    runtime = RUNTIMES[version]
    env = env_dir(version)
    recipe = _recipe(runtime)
    marker = env / MARKER
    if marker.exists() and json.loads(marker.read_text()).get("recipe") == recipe:
        return python_of(env)
    shutil.rmtree(env, ignore_errors=True)
    env.parent.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", str(env)])
    python = str(python_of(env))
    _run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"])
    _run([python, "-m", "pip", "install", "-q", f"pyspark=={runtime.pyspark}", *runtime.pins])
    before = frozen(python_of(env))
    _run([python, "-m", "pip", "install", "-q", *TEST_TOOLS])
    moved = changed(before, frozen(python_of(env)))
    if moved:
        raise EnvironmentError_(f"the test tools moved runtime packages of pyspark {version}: {moved}")
    marker.write_text(json.dumps({"recipe": recipe, "runtime": before}))
    return python_of(env)


def changed(before: dict[str, str], after: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """Packages of `before` whose version is different (or that are gone) in `after`."""
    return {name: (version, after.get(name)) for name, version in before.items() if after.get(name) != version}


def build_wheel(checkout: Path, out_dir: Path) -> Path:
    """The connector's wheel, built from `checkout` as a release would be."""
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out_dir), str(checkout)])
    (wheel,) = out_dir.glob("staticmq-*.whl")
    return wheel


def install_beside(python: Path, wheel: Path) -> dict[str, tuple[str, str | None]]:
    """Installs `wheel` with its requirements (what `pip install staticmq` does) and returns the
    packages it changed; raises if `pip check` then finds a broken requirement."""
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "staticmq"], capture_output=True, check=False)
    before = frozen(python)
    _run([str(python), "-m", "pip", "install", "-q", str(wheel)])
    moved = changed(before, frozen(python))
    _run([str(python), "-m", "pip", "check"])
    return moved


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(RUNTIMES):
        print(ensure_runtime(name))
