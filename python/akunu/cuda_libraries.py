"""Where NVIDIA's pip packages keep their shared libraries, for the CUDA
backend's run-time loading of cuBLAS (prefill GEMMs): PyTorch and others
install ``nvidia-cublas`` as ``site-packages/nvidia/<name>/lib``, which the
dynamic loader does not search. The C++ side tries these folders after the
system's (``AKUNU_CUBLAS_DIRS``)."""

from __future__ import annotations

import glob
import importlib.util
import os
from typing import List


def nvidia_library_dirs() -> List[str]:
    """The ``lib`` folders of the installed ``nvidia.*`` packages, sorted."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    roots = list(spec.submodule_search_locations or []) if spec else []
    dirs: List[str] = []
    for root in roots:
        dirs.extend(d for d in sorted(glob.glob(os.path.join(root, "*", "lib"))) if os.path.isdir(d))
    return dirs


def export_cublas_dirs() -> None:
    """Sets AKUNU_CUBLAS_DIRS for the CUDA backend unless the user did."""
    if "AKUNU_CUBLAS_DIRS" in os.environ:
        return
    dirs = nvidia_library_dirs()
    if dirs:
        os.environ["AKUNU_CUBLAS_DIRS"] = os.pathsep.join(dirs)
