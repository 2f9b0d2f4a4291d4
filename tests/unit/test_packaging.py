"""Goal: `samsa.*` installs the same from a wheel as from the editable checkout the tests run on.

Method: build a wheel of the repository (pip, build isolation as a user would have it), check that
every module lands under `samsa/` and nothing generic (`common/`, `services/`) reaches
site-packages,
then import the installed copy in a fresh interpreter that cannot see the checkout or the editable
finder. The editable side is covered by the rest of the suite, which imports `samsa.*` through it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    (built,) = out.glob("samsa-*.whl")
    return built


def test_wheel_holds_only_the_samsa_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {
        name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")
    }
    assert top_level == {"samsa"}
    for expected in (
        "samsa/v1/broker_pb2.py",
        "samsa/v1/broker_pb2_grpc.py",
        "samsa/common/record/header.py",
        "samsa/common/record/codec.py",
        "samsa/services/broker/log/log.py",
        "samsa/cli/main.py",
    ):
        assert expected in names, f"{expected} missing from the wheel"


def test_wheel_imports_without_the_checkout(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    # -S skips site.py, so the editable finder's .pth is never processed; dependencies still
    # come from this interpreter's site-packages, named explicitly after the wheel's copy.
    path = os.pathsep.join([str(target), sysconfig.get_paths()["purelib"]])
    probe = (
        "import samsa.common.record.codec as c, samsa.services.broker.log as l;"
        "import samsa.v1.broker_pb2;"
        "print(c.__file__); print(l.__file__)"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        env={"PYTHONPATH": path, "PATH": os.environ.get("PATH", "")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    for line in result.stdout.splitlines():
        assert line.startswith(str(target)), f"imported from outside the wheel: {line}"
