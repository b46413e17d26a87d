"""memfit's PEP 517 build backend: ``pip install .`` configures the project
with its own CMake, builds the target ``_memfit`` (the extension, with the
library it links) and packs it with python/memfit/*.py into a wheel.

It lives in the tree so that building needs nothing from outside the
machine: CMake, the compiler, Python's headers and pybind11 are Debian's
(scripts/install-deps.sh). The build directory is ``build-python`` (kept, so
a second install only relinks what changed); ``MEMFIT_BUILD_DIR`` names
another, e.g. ``build``, the one scripts/build.sh and the tests use, which
then only adds the extension to what is built there already.
"""

import base64
import functools
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "memfit"
SUMMARY = "Train deep networks inside a fixed memory budget: plan, size and train from Python"
REQUIRES = ["numpy"]
EXTRAS = {"torch": ["torch", "onnx"]}  # from_torch: torch.onnx needs onnx
REQUIRES_PYTHON = ">=3.9"


@functools.lru_cache(maxsize=None)
def _version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        match = re.search(r"project\(memfit VERSION ([0-9.]+)", f.read())
    if not match:
        raise RuntimeError("memfit_build: no `project(memfit VERSION x.y.z)` in CMakeLists.txt")
    return match.group(1)


def _metadata():
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {_version()}",
             f"Summary: {SUMMARY}", f"Requires-Python: {REQUIRES_PYTHON}"]
    lines += [f"Requires-Dist: {r}" for r in REQUIRES]
    for extra, requires in EXTRAS.items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in requires]
    return "\n".join(lines) + "\n"


def _tag():
    if sys.implementation.name != "cpython":
        raise RuntimeError(f"memfit_build: the extension is built for CPython, not {sys.implementation.name}")
    python = "cp%d%d" % sys.version_info[:2]
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{python}-{python}-{platform}"


def _run(command):
    print("memfit_build: " + " ".join(command), file=sys.stderr, flush=True)
    # The build's output goes to stderr, which pip shows with -v and on failure.
    subprocess.run(command, check=True, stdout=sys.stderr)


def _build_extension():
    """Builds the extension; returns the build tree's package directory."""
    build = os.environ.get("MEMFIT_BUILD_DIR") or os.path.join(ROOT, "build-python")
    build = os.path.abspath(build)
    configure = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                 "-DMEMFIT_PYTHON=ON", f"-DPython_EXECUTABLE={sys.executable}"]
    if not os.environ.get("MEMFIT_BUILD_DIR"):
        configure.append("-DMEMFIT_BUILD_TESTS=OFF")  # its own tree: the module alone
    _run(configure)
    _run(["cmake", "--build", build, "--target", "_memfit", "-j", str(os.cpu_count() or 1)])
    return os.path.join(build, "python", NAME)


def _dist_info():
    return f"{NAME}-{_version()}.dist-info"


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory, files):
    """files: [(path in the wheel, bytes)]; adds the dist-info and returns the name."""
    tag = _tag()
    info = _dist_info()
    files = list(files) + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: memfit_build\nRoot-Is-Purelib: false\n"
                           f"Tag: {tag}\n").encode()),
        (f"{info}/top_level.txt", f"{NAME}\n".encode()),
    ]
    record = [_record_line(path, data) for path, data in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{NAME}-{_version()}-{tag}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files:
            entry = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            entry.external_attr = (0o755 if path.endswith(".so") else 0o644) << 16
            wheel.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    package = _build_extension()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    extension = os.path.join(package, "_memfit" + suffix)
    if not os.path.isfile(extension):
        raise RuntimeError(f"memfit_build: the build made no {extension}")
    source = os.path.join(ROOT, "python", NAME)
    files = [(f"{NAME}/{f}", _read(os.path.join(source, f)))
             for f in sorted(os.listdir(source)) if f.endswith(".py")]
    files.append((f"{NAME}/_memfit{suffix}", _read(extension)))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """``pip install -e .``: a wheel whose .pth file puts the build tree's
    package (the extension beside links to python/memfit/*.py) on the path."""
    package = _build_extension()
    pth = os.path.dirname(package) + "\n"
    return _write_wheel(wheel_directory, [(f"__editable__.{NAME}.pth", pth.encode())])


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, _dist_info())
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def _source_files():
    """The files git tracks, or, outside a git checkout, every file but builds'."""
    try:
        listed = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], check=True,
                                capture_output=True).stdout
        return sorted(p for p in listed.decode().split("\0") if p and os.path.isfile(os.path.join(ROOT, p)))
    except (OSError, subprocess.CalledProcessError):
        found = []
        for directory, subdirs, names in os.walk(ROOT):
            subdirs[:] = [d for d in subdirs if not d.startswith(("build", ".git"))]
            found += [os.path.relpath(os.path.join(directory, n), ROOT) for n in names]
        return sorted(found)


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as sdist:
        for path in _source_files():
            sdist.add(os.path.join(ROOT, path), arcname=f"{base}/{path}", recursive=False)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        sdist.addfile(info, io.BytesIO(data))
    return name
