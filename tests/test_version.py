"""The version moves (issue 39): pyproject.toml, `raycompo.__version__` and CHANGELOG.md's
newest release say the same, and a run folder's config.json records which release wrote
it (`raycompo_version`) and which resumed it (`resumed`), without the resume check
(RunConfig, the checkpoint's fingerprint) depending on either."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

import raycompo
from raycompo.runfolder import results
from tests.helpers import SMALL_DRO

ROOT = Path(__file__).resolve().parents[1]
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.M)


def pyproject_version() -> str:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: tomli, which pytest itself requires there
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def changelog_releases() -> list[tuple[str, str]]:
    """(version, date) of CHANGELOG.md's release headings, newest first."""
    return RELEASE.findall((ROOT / "CHANGELOG.md").read_text())


def test_one_version_everywhere():
    releases = changelog_releases()
    assert releases, "CHANGELOG.md has no '## [X.Y.Z] - YYYY-MM-DD' heading"
    assert pyproject_version() == raycompo.__version__ == releases[0][0]


def test_the_changelog_keeps_its_form():
    """Keep a Changelog 1.1.0: an Unreleased section first, then the releases newest
    first, each with its date."""
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.*)$", text, re.M)
    assert headings[0] == "[Unreleased]"
    versions = [tuple(int(p) for p in v.split(".")) for v, _ in changelog_releases()]
    assert len(versions) == len(headings) - 1 and versions == sorted(versions, reverse=True)
    dates = [d for _, d in changelog_releases()]
    assert dates == sorted(dates, reverse=True)


def _run(out: Path, rounds: int = 2):
    return raycompo.run("dro-mnist5k", "fedavg", rounds=rounds, settings=SMALL_DRO, backend="inline", threads=1,
                        out=out)


def _config(out: Path) -> dict:
    return json.loads((out / "config.json").read_text())


def test_a_run_records_the_version_that_wrote_it(tmp_path):
    result = _run(tmp_path / "x", rounds=1)
    config = _config(tmp_path / "x")
    assert config["raycompo_version"] == raycompo.__version__
    assert "resumed" not in config  # a run that was never resumed
    assert result.config["raycompo_version"] == raycompo.__version__
    without_folder = raycompo.run("dro-mnist5k", "fedavg", rounds=1, settings=SMALL_DRO, backend="inline", threads=1)
    assert without_folder.config["raycompo_version"] == raycompo.__version__


@pytest.mark.parametrize("recorded", [None, "0.0.9", raycompo.__version__],
                         ids=["no version (before 0.1.1)", "another version", "this version"])
def test_a_run_resumes_whatever_version_wrote_it(tmp_path, capsys, recorded):
    """A folder whose config.json lacks the key (a run started before 0.1.1) or names
    another release resumes; the version that started it is kept, each resume is added to
    `resumed` with the round it went on from, and a note says when the release changed."""
    out = tmp_path / "x"
    _run(out, rounds=2)
    config = _config(out)
    if recorded is None:
        del config["raycompo_version"]
    else:
        config["raycompo_version"] = recorded
    (out / "config.json").write_text(json.dumps(config, indent=2))
    capsys.readouterr()

    result = raycompo.resume(out, rounds=3)

    assert result.status == "completed" and list(result.metrics["round"]) == [0, 1, 2, 3]
    after = _config(out)
    assert after["status"] == "completed" and after["rounds_done"] == 3
    assert after.get("raycompo_version") == recorded  # the release that started the run, as recorded
    assert after["resumed"] == [{"round": 2, "raycompo_version": raycompo.__version__}]
    err = capsys.readouterr().err
    if recorded == raycompo.__version__:
        assert "written by raycompo" not in err
    else:
        shown = recorded or "0.1.0 or earlier"
        assert f"note: the run was written by raycompo {shown}; the rounds after 2 are written by " \
               f"{raycompo.__version__}" in err

    raycompo.resume(out, rounds=4)  # a second resume, by the same release: added, no note
    assert _config(out)["resumed"] == [{"round": 2, "raycompo_version": raycompo.__version__},
                                       {"round": 3, "raycompo_version": raycompo.__version__}]
    assert "written by raycompo" not in capsys.readouterr().err


def test_the_rows_of_a_resumed_run_do_not_depend_on_the_recorded_version(tmp_path):
    """The version is a record, not part of the run: rows equal the uninterrupted run's."""
    whole = _run(tmp_path / "whole", rounds=3)
    _run(tmp_path / "cut", rounds=2)
    config = _config(tmp_path / "cut")
    config["raycompo_version"] = "0.0.9"
    (tmp_path / "cut" / "config.json").write_text(json.dumps(config))
    resumed = raycompo.resume(tmp_path / "cut", rounds=3)
    columns = [c for c in whole.metrics.columns if c not in ("round_time", "wall_time")]
    a, b = whole.metrics[columns], resumed.metrics[columns]
    assert a.shape == b.shape
    numeric = a.select_dtypes("number").columns
    assert ((a[numeric] - b[numeric]).abs() <= 1e-6 * a[numeric].abs().clip(lower=1.0)).all().all()


def test_version_record_keeps_what_it_can_read():
    """A damaged record (not a string, not a list) does not stop a resume: what reads is kept."""
    v = raycompo.__version__
    assert results.version_record() == {"raycompo_version": v}
    assert results.version_record({"raycompo_version": 1, "resumed": "x"}, 4) == {
        "resumed": [{"round": 4, "raycompo_version": v}]}
    assert results.version_record({"raycompo_version": "0.1.1", "resumed": [{"round": 2}, 7]}, 5) == {
        "raycompo_version": "0.1.1", "resumed": [{"round": 2}, {"round": 5, "raycompo_version": v}]}
    assert results.version_note({"raycompo_version": v}, 3) is None
    assert results.version_note({"raycompo_version": v, "resumed": [{"round": 2, "raycompo_version": "9.9.9"}]}, 3)
