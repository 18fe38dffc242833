"""The CPU backend's default thread count (backend/cpu/cpu_topology.cpp): one
thread per physical core this process may run on, hyperthread siblings
counted once, CPUs outside the affinity mask not at all; AKUNU_NUM_THREADS
overrides it."""

import os
import subprocess
import sys

import pytest

from akunu import _core, _testing


def sysfs(root, cores):
    """A fake /sys/devices/system/cpu: cores[cpu] = (package, core)."""
    for cpu, (package, core) in cores.items():
        d = root / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "physical_package_id").write_text(f"{package}\n")
        (d / "core_id").write_text(f"{core}\n")
    return str(root)


def test_hyperthread_siblings_count_once(tmp_path):
    # 2 packages x 2 cores x 2 threads, numbered as Linux numbers them (siblings n and n + 4)
    root = sysfs(tmp_path, {c: (c // 2 % 2, c % 2) for c in range(8)})
    assert _testing.count_physical_cores(list(range(8)), root) == 4
    assert _testing.count_physical_cores([0, 4], root) == 1          # one core's two threads
    assert _testing.count_physical_cores([0, 1, 2, 3], root) == 4    # one thread of each core
    # the same core_id in another package is another core
    assert _testing.count_physical_cores([0, 2], root) == 2


def test_cpus_without_topology_count_as_cores(tmp_path):
    root = sysfs(tmp_path, {0: (0, 0), 1: (0, 0)})
    assert _testing.count_physical_cores([0, 1, 5, 6], root) == 3
    assert _testing.count_physical_cores([3], str(tmp_path / "missing")) == 1
    (tmp_path / "cpu7" / "topology").mkdir(parents=True)
    (tmp_path / "cpu7" / "topology" / "core_id").write_text("garbage\n")
    assert _testing.count_physical_cores([7], root) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="affinity masks and sysfs are Linux's")
def test_default_is_this_process_physical_cores():
    cpus = sorted(os.sched_getaffinity(0))
    cores = set()
    unknown = 0
    for c in cpus:
        d = f"/sys/devices/system/cpu/cpu{c}/topology/"
        try:
            with open(d + "physical_package_id") as p, open(d + "core_id") as k:
                cores.add((int(p.read()), int(k.read())))
        except (OSError, ValueError):
            unknown += 1
    env = {k: v for k, v in os.environ.items() if k != "AKUNU_NUM_THREADS"}
    code = "from akunu import _core; print(_core.default_threads())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert int(out.stdout) == max(1, len(cores) + unknown)
    # a narrower affinity mask (as a cpuset container's) narrows the default
    if len(cpus) > 1:
        one = ("import os; os.sched_setaffinity(0, {%d}); from akunu import _core; print(_core.default_threads())"
               % cpus[0])
        out = subprocess.run([sys.executable, "-c", one], env=env, capture_output=True, text=True, check=True)
        assert int(out.stdout) == 1


def test_environment_overrides_the_default():
    code = "from akunu import _core; print(_core.default_threads())"
    for value, expected in (("3", 3), ("0", None), ("junk", None)):
        env = dict(os.environ, AKUNU_NUM_THREADS=value)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert int(out.stdout) == (expected if expected is not None else _default_without_env())


def _default_without_env():
    env = {k: v for k, v in os.environ.items() if k != "AKUNU_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", "from akunu import _core; print(_core.default_threads())"],
                         env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)

