"""JVM artifacts from Maven Central, fetched once with `mvn` and cached outside the repository.

Delta Lake's jars (for `configure_spark(delta=True)`), Apache RocketMQ and Apache Kafka (for the
real-backend tests and the peer benchmarks) and Spark's Kafka connector all come through here:

    jars = fetch_artifacts("delta-4.4.0", ["io.delta:delta-spark_4.2_2.13:4.4.0"])

A *bundle* is a name and a list of `group:artifact:version` coordinates. Its jars (with their
compile and runtime dependencies, not the `provided` ones such as Spark itself) are copied by
`mvn dependency:copy-dependencies` from a generated pom into `<cache>/<bundle>/`; a `bundle.json`
written last records the coordinates, so a later call with the same coordinates needs no network
and a half-done fetch is redone. The cache is `$STATICMQ_CACHE` or `~/.cache/staticmq`.

From the shell: `python -m staticmq_spark.local_clusters.jvm_artifacts NAME COORD [COORD ...]` prints the
classpath.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from staticmq_spark.errors import StaticMQError

MARKER = "bundle.json"


class ArtifactFetchError(StaticMQError):
    """Maven could not fetch a bundle (no `mvn`, no network, or an artifact that does not exist)."""

    code = "ARTIFACT_FETCH"


def cache_root() -> Path:
    configured = os.environ.get("STATICMQ_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "staticmq"


def parse_coordinate(coordinate: str) -> tuple[str, str, str]:
    parts = coordinate.split(":")
    if len(parts) != 3 or not all(parts):
        raise ArtifactFetchError(f"Maven coordinate {coordinate!r} is not group:artifact:version")
    return parts[0], parts[1], parts[2]


def pom_for(coordinates: Sequence[str], excludes: Sequence[str] = ()) -> str:
    """A pom whose dependencies are `coordinates`; `excludes` (`group:artifact`) are cut out of
    every dependency's transitive tree."""
    exclusion_xml = "".join(
        f"<exclusion><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId></exclusion>"
        for g, a in (e.split(":", 1) for e in excludes)
    )
    deps = []
    for coordinate in coordinates:
        group, artifact, version = parse_coordinate(coordinate)
        deps.append(
            f"<dependency><groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"
            f"<version>{escape(version)}</version><exclusions>{exclusion_xml}</exclusions></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>staticmq.cache</groupId><artifactId>bundle</artifactId><version>0</version>"
        f"<dependencies>{''.join(deps)}</dependencies></project>"
    )


def bundle_dir(name: str) -> Path:
    if not name or "/" in name or name.startswith("."):
        raise ArtifactFetchError(f"bundle name {name!r} must be a plain directory name")
    return cache_root() / "jars" / name


def cached_jars(name: str, coordinates: Sequence[str], excludes: Sequence[str] = ()) -> list[Path] | None:
    """The bundle's jars if it was fetched completely with these coordinates, else None."""
    target = bundle_dir(name)
    try:
        recorded = json.loads((target / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if recorded.get("coordinates") != list(coordinates) or recorded.get("excludes") != list(excludes):
        return None
    jars = [target / jar for jar in recorded.get("jars", [])]
    return jars if jars and all(jar.is_file() for jar in jars) else None


def fetch_artifacts(
    name: str, coordinates: Sequence[str], *, excludes: Sequence[str] = (), timeout_s: float = 1200.0
) -> list[Path]:
    """The jars of a bundle, fetching them with `mvn` the first time (see the module docstring)."""
    if not coordinates:
        raise ArtifactFetchError(f"bundle {name!r} names no artifact")
    found = cached_jars(name, coordinates, excludes)
    if found is not None:
        return found
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ArtifactFetchError(f"fetching {name} needs Maven (`mvn`) on PATH; install Maven 3")
    target = bundle_dir(name)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="staticmq-mvn-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(pom_for(coordinates, excludes))
        command = [
            mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
            f"-DoutputDirectory={target}", "-DincludeScope=runtime",
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ArtifactFetchError(f"fetching {name} with mvn took over {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise ArtifactFetchError(f"mvn could not fetch {name} ({', '.join(coordinates)}):\n{tail}")
    jars = sorted(p.name for p in target.glob("*.jar"))
    if not jars:
        raise ArtifactFetchError(f"mvn fetched no jar for {name} ({', '.join(coordinates)})")
    marker = {"coordinates": list(coordinates), "excludes": list(excludes), "jars": jars}
    (target / MARKER).write_text(json.dumps(marker, indent=1))
    return [target / jar for jar in jars]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print(
            "usage: python -m staticmq_spark.local_clusters.jvm_artifacts NAME GROUP:ARTIFACT:VERSION ...",
            file=sys.stderr,
        )
        return 2
    try:
        jars = fetch_artifacts(args[0], args[1:])
    except ArtifactFetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(os.pathsep.join(str(jar) for jar in jars))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
