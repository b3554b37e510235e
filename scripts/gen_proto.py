"""Regenerate the protobuf/gRPC modules under staticmq_spark/protocol/pb from proto/.

The ``*_pb2.py`` and ``*_pb2_grpc.py`` modules are generated with an OLD toolchain on purpose:
grpcio-tools==1.64.0, whose bundled protoc is 26.1 (protobuf Python 5.26.1). Generated code runs
only on runtimes at least as new as the toolchain that made it: newer protoc output calls
``ValidateProtobufRuntimeVersion`` and refuses an older protobuf, and ``*_pb2_grpc.py`` compares
grpcio with its ``GRPC_GENERATED_VERSION`` (1.64.0's code only warns, later ones', e.g. 1.85's,
refuse to import). Managed Spark runtimes pin older packages than today's (e.g. grpcio 1.67.0 with
protobuf 5.29.4, whose grpcio-status needs protobuf < 6), and a wheel whose gencode came from a new
toolchain makes ``pip install`` replace them. So the lower bounds in setup.cfg's install_requires
(``grpcio>=1.64``, ``protobuf>=5.26.1,<8``) are these two versions, and
tests/unit/protocol/pb/test_generated_protocol.py fails if a regeneration raises either. The same
gencode is tested on protobuf 7.x with grpcio 1.85.

The ``.pyi`` stubs come from mypy-protobuf (the dev extra's ``protoc-gen-mypy`` plugins, found on
PATH); they do not depend on which protoc drives the plugin.

Regenerate in a throwaway venv outside the checkout (the dev environment's grpcio-tools is too new,
and grpcio-tools 1.64.0 wants protobuf < 6, so it cannot live there)::

    python -m venv /tmp/gen && /tmp/gen/bin/pip install grpcio-tools==1.64.0
    /tmp/gen/bin/python scripts/gen_proto.py          # *_pb2.py, *_pb2_grpc.py and the .pyi stubs

with the dev environment's ``protoc-gen-mypy`` on PATH (or ``python scripts/gen_proto.py --stubs``
from the dev environment for the stubs alone). Another grpcio-tools is refused for the Python
modules; raising the toolchain means raising setup.cfg's floors and testing the new ones.
"""

from __future__ import annotations

import argparse
from importlib import metadata
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
# The toolchain the committed *_pb2.py / *_pb2_grpc.py come from (see the docstring).
PINNED_GRPCIO_TOOLS = "1.64.0"


def grpcio_tools_version() -> str:
    return metadata.version("grpcio-tools")


def generate(out_dir: Path, *, modules: bool = True, stubs: bool = True, any_toolchain: bool = False) -> None:
    """Write the Python modules (``modules``: only with the pinned grpcio-tools unless
    ``any_toolchain``, which the tests use to compare what the protos define) and/or the .pyi stubs
    (``stubs``) for every .proto under proto/ into ``out_dir``."""
    if modules and not any_toolchain and grpcio_tools_version() != PINNED_GRPCIO_TOOLS:
        raise SystemExit(
            f"grpcio-tools {grpcio_tools_version()} is running; the committed *_pb2.py and "
            f"*_pb2_grpc.py come from grpcio-tools=={PINNED_GRPCIO_TOOLS} (protoc 26.1), which keeps "
            "setup.cfg's grpcio/protobuf floors low: run this script from a venv holding that "
            "version (see the docstring), or pass --stubs for the .pyi stubs alone"
        )
    protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto"))
    outputs = []
    if modules:
        outputs += [f"--python_out={out_dir}", f"--grpc_python_out={out_dir}"]
    if stubs:
        outputs += [f"--mypy_out={out_dir}", f"--mypy_grpc_out={out_dir}"]
    if protoc.main(["protoc", f"-I{ROOT / 'proto'}", *outputs, *protos]) != 0:
        raise SystemExit("protoc failed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", nargs="?", type=Path, default=ROOT, help="default: the checkout")
    parser.add_argument("--stubs", action="store_true", help="only the .pyi stubs (any grpcio-tools)")
    args = parser.parse_args()
    generate(args.out_dir, modules=not args.stubs)
