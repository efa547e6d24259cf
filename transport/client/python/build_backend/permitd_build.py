"""PEP 517 build backend of the permitd client: setuptools' own
(``setuptools.build_meta``), with a standard-library fallback for wheels.

setuptools makes wheels with its own ``bdist_wheel`` from version 70.1 on;
before that it needs the separate ``wheel`` package. ``pip install
--no-build-isolation`` installs no build dependency, so on a machine with
an older setuptools and no ``wheel`` (and no package index to fetch it
from) setuptools alone cannot install the client. This wrapper then builds
the wheel itself: the package is pure Python, so a wheel is the package's
files, its metadata (from ``pyproject.toml``) and a RECORD, zipped. With
``wheel`` present, or a newer setuptools, everything is setuptools'.
"""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from typing import Dict, List, Optional, Tuple

from setuptools import build_meta as _st

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)


def _setuptools_builds_wheels() -> bool:
    try:
        import setuptools.command.bdist_wheel  # noqa: F401  (setuptools >= 70.1)

        return True
    except ImportError:
        pass
    try:
        import wheel.bdist_wheel  # noqa: F401

        return True
    except ImportError:
        return False


# -- sdists: setuptools -------------------------------------------------------

get_requires_for_build_sdist = _st.get_requires_for_build_sdist
build_sdist = _st.build_sdist


def get_requires_for_build_wheel(config_settings=None):
    """setuptools' requirements (``wheel`` before 70.1): an isolated build
    installs them and then builds with setuptools."""
    return _st.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_editable(config_settings=None):
    """As :func:`get_requires_for_build_wheel`."""
    return _st.get_requires_for_build_editable(config_settings)


# -- wheels: setuptools, or the fallback ---------------------------------------


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    if _setuptools_builds_wheels():
        return _st.prepare_metadata_for_build_wheel(metadata_directory, config_settings)
    return _write_dist_info(metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if _setuptools_builds_wheels():
        return _st.build_wheel(wheel_directory, config_settings, metadata_directory)
    return _build(wheel_directory, editable=False)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    if _setuptools_builds_wheels():
        return _st.prepare_metadata_for_build_editable(metadata_directory, config_settings)
    return _write_dist_info(metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    if _setuptools_builds_wheels():
        return _st.build_editable(wheel_directory, config_settings, metadata_directory)
    return _build(wheel_directory, editable=True)


# -- the fallback ---------------------------------------------------------------


def _load_pyproject() -> dict:
    path = os.path.join(_ROOT, "pyproject.toml")
    try:
        import tomllib as toml  # Python >= 3.11
    except ImportError:
        try:
            from setuptools.extern import tomli as toml  # vendored by setuptools >= 61
        except ImportError:
            import tomli as toml  # type: ignore[no-redef]
    with open(path, "rb") as f:
        return toml.load(f)


def _project() -> Tuple[str, str, dict]:
    p = _load_pyproject()["project"]
    return p["name"], p["version"], p


def _metadata() -> str:
    name, version, p = _project()
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + name,
        "Version: " + version,
    ]
    if p.get("description"):
        lines.append("Summary: " + p["description"])
    if p.get("keywords"):
        lines.append("Keywords: " + ",".join(p["keywords"]))
    if p.get("requires-python"):
        lines.append("Requires-Python: " + p["requires-python"])
    for c in p.get("classifiers", []):
        lines.append("Classifier: " + c)
    for d in p.get("dependencies", []):
        lines.append("Requires-Dist: " + d)
    body = ""
    readme = p.get("readme")
    if isinstance(readme, str):
        lines.append("Description-Content-Type: text/markdown" if readme.endswith(".md") else "Description-Content-Type: text/plain")
        with open(os.path.join(_ROOT, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _dist_info_name() -> str:
    name, version, _ = _project()
    return "%s-%s.dist-info" % (name.replace("-", "_"), version)


def _dist_info_files() -> Dict[str, bytes]:
    return {
        "METADATA": _metadata().encode("utf-8"),
        "WHEEL": (
            "Wheel-Version: 1.0\n"
            "Generator: permitd_build (standard-library fallback)\n"
            "Root-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        ).encode("ascii"),
        "top_level.txt": b"permitd\n",
    }


def _write_dist_info(metadata_directory: str) -> str:
    d = _dist_info_name()
    out = os.path.join(metadata_directory, d)
    os.makedirs(out, exist_ok=True)
    for fn, data in _dist_info_files().items():
        with open(os.path.join(out, fn), "wb") as f:
            f.write(data)
    return d


def _package_files() -> List[Tuple[str, str]]:
    """(path in the wheel, path on disk) of every file of src/permitd."""
    src = os.path.join(_ROOT, "src")
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(src, "permitd")):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(dirpath, fn)
            out.append((os.path.relpath(full, src).replace(os.sep, "/"), full))
    return out


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _build(wheel_directory: str, editable: bool) -> str:
    name, version, _ = _project()
    wheel_name = "%s-%s-py3-none-any.whl" % (name.replace("-", "_"), version)
    entries: List[Tuple[str, bytes]] = []
    if editable:
        # A .pth file puts src/ on sys.path: the installed package is the
        # working tree.
        src = os.path.join(_ROOT, "src")
        entries.append(("__editable__.%s-%s.pth" % (name, version), (src + "\n").encode("utf-8")))
    else:
        for arcname, full in _package_files():
            with open(full, "rb") as f:
                entries.append((arcname, f.read()))
    d = _dist_info_name()
    for fn, data in _dist_info_files().items():
        entries.append((d + "/" + fn, data))
    record = [_record_line(a, data) for a, data in entries] + [d + "/RECORD,,"]
    entries.append((d + "/RECORD", ("\n".join(record) + "\n").encode("utf-8")))
    os.makedirs(wheel_directory, exist_ok=True)
    path = os.path.join(wheel_directory, wheel_name)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for arcname, data in entries:
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return wheel_name


__all__ = [
    "get_requires_for_build_sdist",
    "build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_wheel",
    "build_wheel",
    "get_requires_for_build_editable",
    "prepare_metadata_for_build_editable",
    "build_editable",
]
