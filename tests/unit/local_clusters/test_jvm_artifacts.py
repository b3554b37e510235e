"""The Maven bundle cache: pom generation, coordinate checks and cache hits without Maven."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from staticmq_spark.local_clusters import jvm_artifacts
from staticmq_spark.local_clusters.jvm_artifacts import ArtifactFetchError, fetch_artifacts, pom_for

NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def test_pom_lists_each_coordinate_with_the_excludes_on_every_dependency() -> None:
    pom = ET.fromstring(pom_for(["a.b:c:1.0", "d:e_2.13:4.2.0"], excludes=["org.x:y"]))
    deps = pom.findall("m:dependencies/m:dependency", NS)
    assert [(d.findtext("m:groupId", namespaces=NS), d.findtext("m:artifactId", namespaces=NS)) for d in deps] == [
        ("a.b", "c"),
        ("d", "e_2.13"),
    ]
    for dep in deps:
        exclusion = dep.find("m:exclusions/m:exclusion", NS)
        assert exclusion is not None
        assert exclusion.findtext("m:groupId", namespaces=NS) == "org.x"


@pytest.mark.parametrize("bad", ["a:b", "a:b:c:d", "a::1", ""])
def test_malformed_coordinate_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(ArtifactFetchError, match="group:artifact:version"):
        pom_for([bad])


def test_bundle_name_must_be_a_plain_directory_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATICMQ_CACHE", str(tmp_path))
    with pytest.raises(ArtifactFetchError, match="plain directory name"):
        fetch_artifacts("../escape", ["a:b:1"])


def test_complete_bundle_is_served_from_the_cache_without_maven(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATICMQ_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "")  # no mvn reachable: a cache hit must not need it
    bundle = tmp_path / "jars" / "demo"
    bundle.mkdir(parents=True)
    (bundle / "x-1.jar").write_bytes(b"PK")
    marker = {"coordinates": ["g:x:1"], "excludes": [], "jars": ["x-1.jar"]}
    (bundle / jvm_artifacts.MARKER).write_text(json.dumps(marker))
    assert fetch_artifacts("demo", ["g:x:1"]) == [bundle / "x-1.jar"]


def test_other_coordinates_or_a_missing_jar_mean_a_new_fetch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATICMQ_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "")
    bundle = tmp_path / "jars" / "demo"
    bundle.mkdir(parents=True)
    marker = {"coordinates": ["g:x:1"], "excludes": [], "jars": ["x-1.jar"]}
    (bundle / jvm_artifacts.MARKER).write_text(json.dumps(marker))
    with pytest.raises(ArtifactFetchError, match="needs Maven"):
        fetch_artifacts("demo", ["g:x:1"])  # the jar itself is gone
    (bundle / "x-1.jar").write_bytes(b"PK")
    with pytest.raises(ArtifactFetchError, match="needs Maven"):
        fetch_artifacts("demo", ["g:x:2"])  # another version


def test_real_fetch_of_a_small_artifact_through_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATICMQ_CACHE", str(tmp_path))
    jars = fetch_artifacts("picocli", ["info.picocli:picocli:4.7.6"])
    assert [jar.name for jar in jars] == ["picocli-4.7.6.jar"]
    assert jars[0].stat().st_size > 100_000


def test_unknown_artifact_fails_naming_the_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATICMQ_CACHE", str(tmp_path))
    with pytest.raises(ArtifactFetchError, match="could not fetch nothing-here"):
        fetch_artifacts("nothing-here", ["org.staticmq.none:does-not-exist:0.0.1"])
