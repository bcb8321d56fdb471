"""The shardstream command: help that teaches, --json for scripts, --config files, clear exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from shardstream_cli import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def test_help_lists_commands_and_teaches():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("pack", "info", "verify", "stream", "demo"):
        assert command in result.output
    pack_help = runner.invoke(app, ["pack", "--help"], env={"COLUMNS": "200"})
    assert "--max-size" in pack_help.output and "256MB" in pack_help.output
    assert "Example: shardstream pack" in pack_help.output


def test_pack_json_summary_and_info(tmp_path, corpus):
    result = runner.invoke(
        app, ["pack", str(corpus.files_dir), str(tmp_path), "--max-size", "40KB", "--json", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    for key in ("pattern", "index", "shards", "samples", "bytes", "skipped"):
        assert key in summary
    assert summary["samples"] == corpus.samples and summary["skipped"] == 0
    info = runner.invoke(app, ["info", str(tmp_path), "--json"])
    assert json.loads(info.stdout)["samples"] == corpus.samples
    assert runner.invoke(app, ["verify", str(tmp_path)]).exit_code == 0


def test_verify_finds_a_damaged_shard(tmp_path, corpus):
    assert runner.invoke(app, ["pack", str(corpus.files_dir), str(tmp_path), "-q"]).exit_code == 0
    shard = next(tmp_path.glob("*.tar"))
    data = bytearray(shard.read_bytes())
    data[700] ^= 0xFF
    shard.write_bytes(bytes(data))
    result = runner.invoke(app, ["verify", str(tmp_path), "--json"])
    assert result.exit_code == 1
    problems = json.loads(result.stdout)["problems"]
    assert any("sha256" in p and shard.name in p for p in problems)


def test_config_file_fills_options_and_the_command_line_wins(tmp_path, corpus):
    config = tmp_path / "c.yaml"
    config.write_text("pack:\n  max-count: 5\n  prefix: fromconfig\n")
    result = runner.invoke(
        app,
        [
            "pack",
            str(corpus.files_dir),
            str(tmp_path / "o"),
            "--config",
            str(config),
            "--prefix",
            "cli",
            "--json",
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["pattern"].startswith("cli-") and summary["shards"] == -(-corpus.samples // 5)
    example = runner.invoke(
        app,
        [
            "pack",
            str(corpus.files_dir),
            str(tmp_path / "e"),
            "--config",
            str(REPO / "configs" / "pack-example.yaml"),
            "--json",
            "-q",
        ],
    )
    assert example.exit_code == 0, example.output
    config.write_text("pack:\n  max_sise: 5\n")
    bad = runner.invoke(app, ["pack", str(corpus.files_dir), str(tmp_path / "b"), "--config", str(config)])
    assert bad.exit_code == 1 and "unknown option 'max_sise'" in bad.output


def test_bad_options_exit_2_with_the_option_named(tmp_path, corpus):
    result = runner.invoke(app, ["pack", str(corpus.files_dir), str(tmp_path), "--max-size", "lots"])
    assert result.exit_code == 2 and "max_size" in result.output and "256MB" in result.output


def test_console_script_runs_the_demo():
    result = subprocess.run(
        [sys.executable, "-m", "shardstream_cli", "demo", "--samples", "12", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    summary = json.loads(result.stdout)
    for layout in ("directory", "manifest"):
        assert summary[layout]["samples_read"] == summary[layout]["samples_packed"] == 12


def test_stream_command_reads_a_packed_dataset(tmp_path, corpus):
    assert runner.invoke(app, ["pack", str(corpus.files_dir), str(tmp_path), "-q"]).exit_code == 0
    result = runner.invoke(app, ["stream", str(tmp_path), "--json", "--no-decode"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["samples"] == corpus.samples and summary["members"]["txt"] == corpus.samples
    assert summary["errors"]["samples_skipped"] == 0
    limited = runner.invoke(app, ["stream", str(tmp_path), "--json", "--limit", "5", "--world-size", "2"])
    assert json.loads(limited.stdout)["samples"] == 5
    missing = runner.invoke(app, ["stream", str(tmp_path / "nothing-{0..1}.tar")])
    assert missing.exit_code == 1 and "nothing-0.tar, does not exist" in missing.output
