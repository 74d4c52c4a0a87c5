"""``--scheduler ADDRESS``: the cluster view's ranks read and reduced on a Dask cluster's workers.

A Dask client serves a standard :class:`concurrent.futures.Executor` (``Client.get_executor``), which
:func:`common.formats.cluster.load_cluster` takes in place of its local process pool; the view is the
same either way. Dask is optional (``pip install --group dask``): nothing imports it unless an address
is given, on the command line or in ``$MSPROF_LAB_DASK_SCHEDULER``. The workers need the lab's
``common`` package importable (the lab's folder on their ``PYTHONPATH``) and the capture at the same
path as here (shared storage); docs/reading_captures.md shows a Slurm and a Kubernetes set-up.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from common.errors import LabError

SCHEDULER_VAR = "MSPROF_LAB_DASK_SCHEDULER"
CONNECT_TIMEOUT_S = 20


def scheduler_address(given: str | None) -> str | None:
    """The address given on the command line, else $MSPROF_LAB_DASK_SCHEDULER, else None (the local pool)."""
    return given or os.environ.get(SCHEDULER_VAR) or None


def _reachable(address: str) -> None:
    """A tcp:// address that refuses connections is said at once (Dask's client would retry it until its timeout)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme != "tcp" or not parts.hostname:
        return  # another transport (tls://, ucx://, inproc://): the client says what is wrong
    try:
        socket.create_connection((parts.hostname, parts.port or 8786), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as err:
        raise LabError(
            f"--scheduler {address}: no Dask scheduler answered ({err})",
            "give the address the scheduler prints (tcp://HOST:8786), or drop --scheduler",
        ) from None


@contextlib.contextmanager
def dask_executor(address: str | None) -> Iterator[object | None]:
    """An executor on the Dask cluster at ``address`` (None: no address, the caller's local pool)."""
    if address is None:
        yield None
        return
    try:
        from distributed import Client
    except ImportError:
        raise LabError(
            f"--scheduler {address}: Dask's distributed package is not installed",
            "install it into the lab's environment: .nox/lab-portable/bin/python -m pip install "
            "--group dask (pyproject.toml), or drop --scheduler to read with the local pool",
        ) from None
    _reachable(address)
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as err:
        raise LabError(
            f"--scheduler {address}: no Dask scheduler answered ({err})",
            "give the address the scheduler prints (tcp://HOST:8786), or drop --scheduler",
        ) from None
    try:
        yield client.get_executor()
    except ModuleNotFoundError as err:  # raised on a worker that cannot import the lab
        raise LabError(
            f"--scheduler {address}: a Dask worker could not import the lab ({err})",
            "start the workers with the lab's folder on PYTHONPATH (and the capture on storage they "
            "share, at the same path)",
        ) from None
    finally:
        client.close()
