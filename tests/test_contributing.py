"""CONTRIBUTING.md's rules a test can hold: commit subjects of at most 72 characters (what
`git log --oneline` shows), for every commit since the rule (4ba5933's parent)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from test_layers import ROOT

SINCE = "5a50b3f"  # the last commit before the rule: the subjects after it are held to it
LIMIT = 72


def long_subjects(log_lines: list[str]) -> list[str]:
    """The `%h %s` lines whose subject is over LIMIT characters."""
    return [line for line in log_lines if len(line.split(" ", 1)[-1]) > LIMIT]


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git missing")
def test_commit_subjects_fit_one_line_of_git_log():
    if _git("cat-file", "-e", f"{SINCE}^{{commit}}").returncode != 0:
        pytest.skip(f"{SINCE} not in this clone's history (a shallow clone)")
    subjects = _git("log", "--format=%h %s", f"{SINCE}..HEAD").stdout.splitlines()
    assert subjects, f"no commit after {SINCE}"
    long = long_subjects(subjects)
    assert not long, f"subjects over {LIMIT} characters:\n" + "\n".join(long)


def test_a_long_subject_is_caught():
    fits, over = "abc1234 " + "x" * LIMIT, "def5678 " + "y" * (LIMIT + 1)
    assert long_subjects([fits, over]) == [over]
