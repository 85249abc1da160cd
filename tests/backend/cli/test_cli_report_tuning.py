"""``python -m backend report … --tuning DIR``: a tuning run's answer as the report's last section; one-line errors."""

from __future__ import annotations

from pathlib import Path

from backend.cli.main import main
from backend.report.html import SECTIONS
from tests.backend.cli.test_cli_report import Sections, one_line
from tests.support.tune_rows import sample_result, sample_trials, write_out


def test_report_with_a_tuning_folder_has_its_section(capsys, tmp_path: Path) -> None:
    out_dir = write_out(tmp_path / "tune", sample_trials(), sample_result())
    out_file = tmp_path / "report.html"
    code = main(["report", "sample:technical", "--config", "recursive chunk_size=400", "--no-quality",
                 "--tuning", str(out_dir), "--out", str(out_file)])
    _, err = capsys.readouterr()
    assert code == 0, err
    page = out_file.read_text(encoding="utf-8")
    parsed = Sections()
    parsed.feed(page)
    assert parsed.sections == [sid for sid, _ in SECTIONS] + ["tuning"]
    assert "held-out IoU 40.0% [31.0, 49.0]" in page and "&lt;b&gt;guide&lt;/b&gt;.pdf" in page


def test_a_tuning_folder_without_a_result_exits_1_with_one_line(capsys, tmp_path: Path) -> None:
    out_dir = write_out(tmp_path / "tune", sample_trials())
    code = main(["report", "sample:technical", "--config", "recursive chunk_size=400", "--no-quality",
                 "--tuning", str(out_dir), "--out", str(tmp_path / "r.html")])
    assert code == 1
    assert "no result.json yet" in one_line(capsys.readouterr().err)
    code = main(["report", "sample:technical", "--config", "recursive", "--tuning", str(tmp_path / "nope"),
                 "--out", str(tmp_path / "r.html")])
    assert code == 1 and "no such folder" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "r.html").exists()
