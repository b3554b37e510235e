"""Every notebook in notebooks/ runs top to bottom on a fresh kernel; a failing cell fails its test.

The notebooks are executed with nbclient (kernel "python3") in a temporary directory; the executed
copies are written there too, never over the committed notebooks. The kernel gets its own TMPDIR,
so whatever a notebook starts (cluster processes, checkpoints) lives under the test's directory and
a process the notebook failed to stop is found, reported and killed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from traitlets.config import Config

from tests.support.waiting import WaitTimeout, wait_until

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
KERNEL = "python3"
CELL_TIMEOUT_S = 300
SHUTDOWN_WAIT_S = 60.0  # a graceful kernel shutdown runs the notebook's atexit clean-up
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _read(path: Path) -> Any:
    return nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]


def _uses_spark(path: Path) -> bool:
    nb = _read(path)
    return any(cell.cell_type == "code" and "pyspark" in cell.source for cell in nb.cells)


def _notebook_params() -> list[Any]:
    params = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        marks = [pytest.mark.slow, *([pytest.mark.spark] if _uses_spark(path) else [])]
        params.append(pytest.param(path.name, marks=marks, id=path.stem))
    return params


def _ensure_kernel() -> None:
    """A fresh machine may lack the "python3" kernel spec: install it for this interpreter."""
    try:
        KernelSpecManager().get_kernel_spec(KERNEL)
    except NoSuchKernel:
        subprocess.run(
            [sys.executable, "-m", "ipykernel", "install", "--user", "--name", KERNEL],
            check=True,
            capture_output=True,
        )


def _processes_under(path: Path) -> dict[int, str]:
    """Live processes whose command line mentions `path` (cluster processes name their data dir)."""
    found = {}
    needle = str(path).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and state != "Z":
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return found


def _leftovers(path: Path, grace_s: float = 20.0) -> dict[int, str]:
    """Processes still running under `path` after `grace_s` (killed now); {} if all exited."""
    found: dict[int, str] = {}

    def all_exited() -> bool:
        nonlocal found
        found = _processes_under(path)
        return not found

    try:
        wait_until(all_exited, grace_s, interval_s=0.5, message=f"the processes under {path} to exit")
    except WaitTimeout:
        pass  # reported by the caller, with what is still running
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return found


def _failure(name: str, nb: Any, index: int | None, exc: Exception, executed: Path) -> str:
    where, source, streams, traceback = "before the first cell", "", "", ""
    if index is not None:
        cell = nb.cells[index]
        outputs = cell.get("outputs", [])
        where, source = f"in cell {index}", cell.source
        streams = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        traceback = "\n".join(line for o in outputs if o.get("output_type") == "error" for line in o.traceback)
    if isinstance(exc, CellExecutionError):
        error = f"{exc.ename}: {exc.evalue}\n\n{ANSI.sub('', traceback or exc.traceback)}"
    else:
        error = f"{type(exc).__name__}: {ANSI.sub('', str(exc))}"
    return (
        f"notebook {name} failed {where}:\n"
        f"----- cell source -----\n{source}\n"
        f"----- its output (last 4000 characters) -----\n{ANSI.sub('', streams)[-4000:]}\n"
        f"----- error -----\n{error}\n"
        f"(the executed notebook is {executed})"
    )


def test_notebooks_exist_and_are_stored_without_outputs() -> None:
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert {p.name for p in paths} >= {"quickstart.ipynb", "remap_while_streaming.ipynb", "pop_consumers.ipynb"}
    for path in paths:
        nb = _read(path)
        nbformat.validate(nb)
        dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
        assert not dirty, f"{path.name}: clear the outputs of cells {dirty} before committing"


@pytest.mark.parametrize("name", _notebook_params())
def test_notebook_runs_top_to_bottom(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    _ensure_kernel()
    extra_env = {}
    if name == "rocketmq.ipynb":  # the session's RocketMQ, not a second one started by the kernel
        extra_env["STATICMQ_ROCKETMQ"] = request.getfixturevalue("rocketmq_cluster").address
    nb = _read(NOTEBOOKS / name)
    workdir = tmp_path / "work"
    kernel_tmp = tmp_path / "tmp"
    workdir.mkdir()
    kernel_tmp.mkdir()
    current: dict[str, int] = {}

    def on_cell_start(cell: Any, cell_index: int, **_: Any) -> None:
        current["index"] = cell_index

    client = NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(workdir)}},
        shutdown_kernel="graceful",
        on_cell_start=on_cell_start,
        config=Config({"KernelManager": {"shutdown_wait_time": SHUTDOWN_WAIT_S}}),
    )
    env = {
        **os.environ,
        **extra_env,
        "TMPDIR": str(kernel_tmp),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    }
    executed = tmp_path / name
    started = time.monotonic()
    error: Exception | None = None
    try:
        client.execute(env=env)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        error = exc
    finally:
        nbformat.write(nb, executed)  # type: ignore[no-untyped-call]
    elapsed = time.monotonic() - started
    left = _leftovers(kernel_tmp)
    if error is not None:
        pytest.fail(_failure(name, nb, current.get("index"), error, executed), pytrace=False)
    assert not left, f"notebook {name} left processes running (now killed): {left}"
    print(f"{name}: {elapsed:.1f}s")
