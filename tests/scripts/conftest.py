"""pytest setup of the Python tests in this folder, which CTest runs (tests/CMakeLists.txt):
one CTest test per pytest test, `pytest FILE::TEST[PARAM]`, with the binaries' paths from
CMake as options (--nmt-train $<TARGET_FILE:nmt-train>, ...) and the test's work folder as
--work. Run by hand after scripts/setup.sh, the defaults are build/'s binaries:

    $VENV/bin/python -m pytest tests/scripts/test_doc_links.py

A run whose tests were all skipped (pytest.skip: a package or file absent) exits 77, which
CTest's SKIP_RETURN_CODE reports as skipped; one that failed anything exits as pytest does.
"""
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # nmt_tools
from nmt_tools import SKIP_EXIT_CODE  # noqa: E402

# option, what it names, where the build puts it (relative to the build folder)
_BINARIES = [("nmt-train", "nmt-train"), ("nmt-ckpt", "nmt-ckpt"),
             ("nmt-translate", "nmt-translate"), ("nmt-score", "nmt-score"),
             ("hf-probe", "hf_probe"), ("hf-tokenizer-probe", "tests/hf_tokenizer_probe"),
             ("int8-probe", "int8_probe")]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nmt-train")
    group.addoption("--build-dir", type=Path, default=ROOT / "build",
                    help="the CMake build folder (default: build/)")
    for name, place in _BINARIES:
        group.addoption(f"--{name}", type=Path, default=None,
                        help=f"the {name} binary (default: BUILD_DIR/{place})")
    group.addoption("--work", type=Path, default=None,
                    help="the tests' work folder (default: BUILD_DIR/tests/pytest-<module>)")


@dataclass(frozen=True)
class Binaries:
    """The built binaries the tests run."""
    build_dir: Path
    train: Path
    ckpt: Path
    translate: Path
    score: Path
    hf_probe: Path
    hf_tokenizer_probe: Path
    int8_probe: Path


@pytest.fixture(scope="session")
def binaries(pytestconfig: pytest.Config) -> Binaries:
    build = pytestconfig.getoption("build_dir").resolve()
    paths = {}
    for name, place in _BINARIES:
        given = pytestconfig.getoption(name.replace("-", "_"))
        paths[name.replace("nmt-", "").replace("-", "_")] = (given or build / place).resolve()
    return Binaries(build_dir=build, **paths)


@pytest.fixture(scope="module")
def work(pytestconfig: pytest.Config, request: pytest.FixtureRequest) -> Path:
    """The module's work folder (--work), made if absent; kept after the run to be read."""
    given = pytestconfig.getoption("work")
    folder = given or (pytestconfig.getoption("build_dir") / "tests" /
                       f"pytest-{request.module.__name__}")
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


_outcomes = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _outcomes["failed"] += 1
    elif report.skipped:
        _outcomes["skipped"] += 1
    elif report.passed and report.when == "call":
        _outcomes["passed"] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == 0 and _outcomes["skipped"] and not (_outcomes["passed"] or
                                                           _outcomes["failed"]):
        session.exitstatus = SKIP_EXIT_CODE
