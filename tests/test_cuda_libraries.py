"""The CUDA backend loads cuBLAS at run time; the Python package points it at
NVIDIA's pip packages (site-packages/nvidia/<name>/lib), which the dynamic
loader does not search."""

import importlib
import os
import sys

from akunu import cuda_libraries


def _fake_site(tmp_path):
    site = tmp_path / "site"
    for name in ("cu13", "cublas"):
        (site / "nvidia" / name / "lib").mkdir(parents=True)
    (site / "nvidia" / "nolib").mkdir()
    (site / "nvidia" / "file").mkdir()
    (site / "nvidia" / "file" / "lib").write_text("not a folder")
    return site


def test_finds_the_lib_folders_of_nvidia_packages(tmp_path, monkeypatch):
    site = _fake_site(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    importlib.invalidate_caches()
    dirs = cuda_libraries.nvidia_library_dirs()
    ours = [d for d in dirs if d.startswith(str(site))]
    assert ours == [str(site / "nvidia" / "cu13" / "lib"), str(site / "nvidia" / "cublas" / "lib")]


def test_export_sets_the_variable_once(tmp_path, monkeypatch):
    site = _fake_site(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    importlib.invalidate_caches()
    monkeypatch.delenv("AKUNU_CUBLAS_DIRS", raising=False)
    cuda_libraries.export_cublas_dirs()
    assert str(site / "nvidia" / "cublas" / "lib") in os.environ["AKUNU_CUBLAS_DIRS"].split(os.pathsep)
    monkeypatch.setenv("AKUNU_CUBLAS_DIRS", "/mine")
    cuda_libraries.export_cublas_dirs()
    assert os.environ["AKUNU_CUBLAS_DIRS"] == "/mine"  # the user's choice stands


def test_no_nvidia_packages(monkeypatch):
    monkeypatch.setattr(cuda_libraries.importlib.util, "find_spec", lambda name: None)
    assert cuda_libraries.nvidia_library_dirs() == []
