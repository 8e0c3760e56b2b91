"""clients/python is an installable package: pip builds and installs it
offline (no build isolation, no index: Debian's setuptools), and the
installed copy imports with redis-py as its one dependency."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def test_pip_installs_it(tmp_path):
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        pytest.skip("no pip for this python3 (Debian's python3-pip)")
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
         "--disable-pip-version-check", "--target", str(target), str(src)],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    check = subprocess.run(
        [sys.executable, "-c", "import cellserver_limit, cellserver_limit.asgi, cellserver_limit.wsgi, sys; "
         "print(cellserver_limit.__version__, cellserver_limit.__file__.startswith(sys.argv[1]))", str(target)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(target)}, cwd=str(tmp_path),
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.split() == ["0.1.0", "True"]
    meta = next(target.glob("cellserver_limit-*.dist-info")) / "METADATA"
    requires = [l for l in meta.read_text().splitlines() if l.startswith("Requires-Dist:")]
    assert requires == ["Requires-Dist: redis (>=4.3)"]


def test_limiters_document_their_options():
    # The options text is shared, so the classes set __doc__ (a docstring
    # must be a literal: "..." + _OPTIONS_DOC alone would leave it None).
    import cellserver_limit

    for cls in (cellserver_limit.Limiter, cellserver_limit.AsyncLimiter):
        assert cls.__doc__ and "key_prefix" in cls.__doc__, cls
