"""Terminal output: tables keep every column, call paths shortened in the middle, wide tables wrapped; no base64."""

from __future__ import annotations

import pandas as pd

import perflow
from perflow.cli.main import main
from perflow.flow.outputs import as_text, fit_width
from perflow.flow.terminal import fit_table, shorten_end, shorten_middle, shorten_path


def test_call_paths_are_shortened_in_the_middle() -> None:
    p = "main/solve/cg/exchange/MPI_Send (cg.f:906)"
    assert shorten_path(p, 26) == "main/…/MPI_Send (cg.f:906)"
    assert shorten_path(p, 35) == "main/…/exchange/MPI_Send (cg.f:906)"
    assert shorten_path(p, 100) == p
    assert shorten_path("main/a_very_long_function_name", 12) == "main/a…_name"  # two frames: cut in the middle
    assert shorten_middle("abcdefghij", 5) == "ab…ij"
    assert shorten_end("waiting in an all-to-all collective", 20) == "waiting in an…"  # at a word


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_a_wide_table_wraps_and_keeps_every_column() -> None:
    header = ["vertex", "name", "call_path", "cost", "top_process", "top_process_cost", "causes"]
    rows = [
        [
            "3",
            "compute",
            "main/timestep/iterate/solve/compute (solve.c:50)",
            "376 ms",
            "3",
            "172 ms",
            "late_sender:0.351",
        ],
        ["7", "MPI_Waitall", "main/timestep/exchange/MPI_Waitall", "244 us", "2", "145 us", "wait_nxn:0.000244"],
    ]
    right = [True, False, False, True, True, True, False]
    lines = fit_table(header, rows, right, 60)
    assert all(len(ln) <= 60 for ln in lines if ln.startswith("|"))
    heads = {c for ln in lines if ln.startswith("| ") and not ln.startswith("| -") for c in _cells(ln)} - {""}
    assert set(header) <= heads  # every column is in one of the parts
    assert sum(ln.startswith("(part ") for ln in lines) >= 1
    assert lines[-1].startswith("(") and "wrapped" in lines[-1] and "--output DIR" in lines[-1]
    # every part repeats the row's id and name
    parts = [ln for ln in lines if ln.startswith("| vertex")]
    assert len(parts) >= 2 and all(_cells(p)[:2] == ["vertex", "name"] for p in parts)
    assert any("main/…/" in ln for ln in lines)  # the call path was shortened before wrapping


def test_markdown_tables_are_aligned_and_fitted() -> None:
    md = "| name | n | long_column_one |\n| :--- | ---: | ---: |\n| main | 1 | 2 |"
    out = fit_width(md, 200).split("\n")
    assert out == [
        "| name | n   | long_column_one |",
        "| :--- | --: | --------------: |",
        "| main |   1 |               2 |",
    ]
    narrow = fit_width(md, 24)
    assert "long_column_one" in narrow and "(part 2 of 2" in narrow


def test_text_tables_and_the_note_under_them() -> None:
    from perflow.passes.report import render_table

    df = pd.DataFrame({"call_path": ["main/solver/iterate/exchange/MPI_Waitall"] * 2, "time": [1.5, 0.25]})
    df.attrs["note"] = "a note longer than the table, which stays as it is: " + "x" * 80
    text = render_table(df, format="text")
    out = fit_width(f"```\n{text}```", 40)
    assert "main/…/exchange/MPI_Waitall  1.50 s" in out and "250 ms" in out
    assert df.attrs["note"] in out  # not taken for a row of the table


def test_frames_are_formatted_with_units() -> None:
    df = pd.DataFrame({"name": ["main"], "time_exc": [0.0015], "bytes_sent": [4096]})
    text = as_text(df, width=80)
    assert "1.50 ms" in text and "4.00 KiB" in text


def test_figures_are_named_never_printed(tmp_path) -> None:
    import base64

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 200).decode()
    report = f"# R\n\n## Scaling\n\n![Scaling of the call paths](data:image/png;base64,{png})\n"
    assert as_text(report).endswith("[figure: Scaling of the call paths; --output DIR writes it]")
    from perflow.flow.outputs import write_value

    p = write_value(report, tmp_path, "report")
    written = p.read_text()
    assert "base64" not in written and "](report_files/fig-1-scaling-of-the-call-paths.png)" in written
    assert (tmp_path / "report_files" / "fig-1-scaling-of-the-call-paths.png").read_bytes()[:4] == b"\x89PNG"


def test_flows_on_the_sample_drop_no_column(capsys, monkeypatch) -> None:
    """At 120 columns, root_cause shows the rank and its cost; every column of its tables is printed."""
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["-q", "run", "root_cause", "--input", "examples/data/ring8.pag"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Findings\n") and "1. 47.0 ms (gain 12.3 ms)  compute (synthetic.c:50) on rank 3" in out
    assert "base64" not in out and "..." not in out
    lines = out.split("\n")
    assert max(len(ln) for ln in lines) <= 120
    heads = {c for ln in lines if ln.startswith("| ") for c in _cells(ln)}
    result = perflow.run("root_cause", pag=perflow.load("examples/data/ring8.pag"))
    for name in ("causes", "short_term", "by_process", "summary"):
        for c in result.outputs[name].columns:
            assert c in heads, (name, c)


def test_cli_errors_name_what_is_missing(capsys, tmp_path) -> None:
    assert main(["run", "critical_path"]) == 2
    assert "missing --input pag (A trace-backed PAG, or a trace to read)" in capsys.readouterr().err
    (tmp_path / "f").write_text("x")
    assert main(["run", "hotspot", "--input", "examples/data/ring8.pag", "--output", str(tmp_path / "f")]) == 2
    assert f"cannot write to {tmp_path / 'f'}: a file is in the way" in capsys.readouterr().err
    assert main(["run", "hotspot", "--input", "examples/data/ring8.pag", "--output", str(tmp_path / "f" / "d")]) == 2
    assert f"cannot write to {tmp_path / 'f' / 'd'}: Not a directory" in capsys.readouterr().err


def test_flow_summaries_are_whole_sentences(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["flows"]) == 0
    out = capsys.readouterr().out
    entries: dict[str, str] = {}
    last = ""
    for ln in out.rstrip("\n").split("\n"):
        if ln.startswith(" "):  # the description goes on, under its column
            entries[last] += " " + ln.strip()
        else:
            last, _, text = ln.partition(" ")
            entries[last] = text.strip()
    assert entries["critical_path"] == (
        "The critical path of a trace: its time per call path, critical-path imbalance and ideal runtime."
    )
    for name, text in entries.items():  # never cut mid-sentence
        assert text.endswith("."), (name, text)
