"""A private Ray instance on this machine (`strived index --ray local`) that stays on it.

Started as Ray starts one by default, a local instance (Ray 2.60) makes connections that leave the
machine or stray outside the folders the product may write (issue 37, measured under strace):

- it finds "its" address by a UDP connect to 8.8.8.8 and then binds every process to the
  machine's network address instead of loopback. ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read when
  Ray is imported, makes it use 127.0.0.1 (what it does on macOS and Windows);
- its dashboard process, started even without the dashboard to run the usage-stats module, probes
  the cloud metadata address 169.254.169.254 before it looks whether usage stats are enabled,
  unless ``~/ray_bootstrap_config.yaml`` names the cluster's provider. The instance is started
  with ``HOME`` set to a private folder holding that file (``provider: local``), so nothing is
  written to the user's home either (Ray's ``~/.ray/auth_token``);
- its session files go to ``/tmp/ray``: they go to the same private folder, removed at exit.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

#: the longest temporary folder the private folder may sit in: Ray puts its sockets at
#: ``<folder>/ray/session_<date>_<time>_<us>_<pid>/sockets/plasma_store`` (~67 bytes below the
#: folder "strived-ray-XXXXXXXX", 20), and an AF_UNIX path holds at most 107 bytes
MAX_BASE = 107 - 67 - 21

#: read by Ray when it is imported: use loopback, never look up the machine's network address
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def prepare_import() -> None:
    """Before ``import ray`` for a local instance: loopback only (see the module docstring)."""
    for k, v in LOOPBACK_ENV.items():
        os.environ.setdefault(k, v)


def _remove(ray, home: str) -> None:
    """At exit: stop the instance (its processes write into ``home`` until then), then remove it."""
    try:
        ray.shutdown()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def start_local(ray, num_cpus: int | None = None) -> str:
    """``ray.init`` of a private local instance whose processes stay on loopback, write only under
    a private temporary folder (returned; removed when this process exits) and never probe for a
    cloud provider."""
    base = tempfile.gettempdir()
    if len(base) > MAX_BASE and os.path.isdir("/tmp"):
        base = "/tmp"          # Ray's socket paths under it must fit AF_UNIX's 107 bytes
    home = tempfile.mkdtemp(prefix="strived-ray-", dir=base)
    atexit.register(_remove, ray, home)
    with open(os.path.join(home, "ray_bootstrap_config.yaml"), "w", encoding="utf-8") as f:
        f.write("# written by strived: a local instance; Ray reads the provider from here\n"
                "provider:\n  type: local\n")
    old = os.environ.get("HOME")
    os.environ["HOME"] = home          # what Ray's processes inherit while they start
    try:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, _temp_dir=os.path.join(home, "ray"))
    finally:
        if old is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = old
    return home
