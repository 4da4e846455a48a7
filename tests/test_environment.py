"""environment.yml must not drift from pyproject.toml: it installs the project itself."""

import tomllib

import yaml


def test_environment_installs_the_project_with_test_extra(repo_dir):
    env = yaml.safe_load((repo_dir / "environment.yml").read_text())
    pip = [d for d in env["dependencies"] if isinstance(d, dict) and "pip" in d][0]["pip"]
    assert "-e .[test]" in pip
    project = tomllib.loads((repo_dir / "pyproject.toml").read_text())["project"]
    py = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python=")][0]
    major_minor = py.split("=")[1]
    assert project["requires-python"].startswith(">=")
    assert tuple(map(int, major_minor.split("."))) >= tuple(map(int, project["requires-python"][2:].split(".")))
    assert "test" in project["optional-dependencies"]
