"""Mistakes in the CLI's arguments are refused before anything is written (no Spark: each fails first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdclake.cli import build_parser, main
from cdclake.exceptions import ConfigError
from cdclake.landing import check_source_name, raw_store
from cdclake.settings import LakeSettings


@pytest.mark.parametrize("name", ["../../outside", "bad/name", "..", ".hidden", "", "a" * 101, "with space"])
def test_a_source_name_that_is_not_one_directory_is_refused(tmp_path: Path, name: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    inbox = tmp_path / "batch.jsonl"
    inbox.write_text("{}\n")
    lake = tmp_path / "lake"
    with pytest.raises(SystemExit) as exit_:
        main(["apply", "--format", "canal", "--input", str(inbox), "--lake", str(lake), "--source", name])
    assert exit_.value.code == 2
    assert f"source name {name!r}" in capsys.readouterr().err
    assert not lake.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["batch.jsonl"]
    with pytest.raises(ConfigError, match="source name"):  # the library refuses it too
        raw_store(LakeSettings.from_env(lake), name)


@pytest.mark.parametrize("name", ["default", "shop", "Shop-EU.2", "unit-takeover", "s"])
def test_source_names_that_name_one_directory_are_taken(name: str) -> None:
    assert check_source_name(name) == name


@pytest.mark.parametrize("command", [
    ["tables"],
    ["dump", "--table", "shop.items"],
    ["quarantine", "list"],
    ["quarantine", "replay"],
    ["dq", "results"],
    ["dq", "held"],
])
def test_a_command_that_reads_a_lake_says_when_there_is_none(tmp_path: Path, command: list[str],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    typo = tmp_path / "lkae"
    assert main([*command, "--lake", str(typo)]) == 2
    assert f"no lake at {typo}: the directory does not exist" in capsys.readouterr().err
    assert not typo.exists()  # `quarantine replay` made an empty lake there before


@pytest.mark.parametrize(("spelled", "table_id"), [("shop.items", "shop.items"), ("SHOP.Items", "shop.items"),
                                                    ("shop.gmall-2020-04", "shop.gmall_2020_04"),
                                                    ("dbo.Order Lines", "dbo.order_lines")])
def test_a_table_is_named_as_the_lake_names_it_or_as_its_source_spells_it(spelled: str, table_id: str) -> None:
    assert build_parser().parse_args(["dump", "--lake", "lake", "--table", spelled]).table == table_id
    assert build_parser().parse_args(["dq", "results", "--lake", "lake", "--table", spelled]).table == table_id
