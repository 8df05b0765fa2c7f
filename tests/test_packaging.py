"""pyproject.toml builds without setuptools' deprecation warnings: the license is an SPDX expression string
(a ``{text = ...}`` table is deprecated since setuptools 77, which is the first release to read the string)."""

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_license_is_an_spdx_string_that_the_required_setuptools_reads():
    data = tomllib.loads(PYPROJECT.read_text())
    assert isinstance(data["project"]["license"], str), "give project.license as an SPDX string, e.g. \"MIT\""
    setuptools = [Requirement(r) for r in data["build-system"]["requires"] if Requirement(r).name == "setuptools"]
    assert len(setuptools) == 1
    assert setuptools[0].specifier.contains(Version("77.0.0"))
    assert not setuptools[0].specifier.contains(Version("76.1.0")), "setuptools < 77 cannot read an SPDX license"
