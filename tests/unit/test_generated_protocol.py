"""The committed gRPC/protobuf modules are exactly what the .proto files generate."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_up_to_date_with_the_proto_files(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen.generate(tmp_path)
    committed = ROOT / "staticmq_spark" / "protocol" / "pb"
    fresh = sorted((tmp_path / "staticmq_spark" / "protocol" / "pb").iterdir())
    assert fresh, "protoc produced nothing"
    for path in fresh:
        assert (committed / path.name).read_text() == path.read_text(), (
            f"{path.name} is stale: run `python scripts/gen_proto.py`"
        )
