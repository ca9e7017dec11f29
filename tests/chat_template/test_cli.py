"""`whileai-datasets template inspect|patch` through the argparse parser the lead's main() uses."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.cli.template import add_parser, run


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="whileai-datasets")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(_parse(*argv), out, err), out.getvalue(), err.getvalue()


def test_inspect_prints_readable_report(trl_dir: Path) -> None:
    code, out, _ = _run("template", "inspect", str(trl_dir / "qwen2_5.jinja"))
    assert code == 0
    assert "generation blocks:        none" in out and "tool calls rendered:      yes" in out


def test_inspect_json_is_machine_readable(trl_dir: Path) -> None:
    code, out, _ = _run("template", "inspect", str(trl_dir / "qwen2_5_training.jinja"), "--json")
    assert code == 0 and json.loads(out)["has_generation_block"] is True


def test_patch_writes_verified_template(trl_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "qwen.jinja"
    code, out, _ = _run("template", "patch", str(trl_dir / "qwen2_5.jinja"), str(target))
    assert code == 0 and f"wrote 4 generation block(s): {target}" in out
    assert ChatTemplate.from_file(target).inspect().covers_assistant_output is True


def test_patch_refusal_exits_1_with_reason(trl_dir: Path, tmp_path: Path) -> None:
    macro = Path(__file__).parent / "templates" / "llama3_macro_scoped.jinja"  # a macro not safe to inline
    code, _, err = _run("template", "patch", str(macro), str(tmp_path / "out.jinja"))
    assert code == 1 and err.startswith("error: llama3_macro_scoped.jinja:11:") and "role header" in err
    assert "[refusal class: mixed-header]" in err
    assert not (tmp_path / "out.jinja").exists()


def test_inspect_syntax_error_exits_1_with_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jinja"
    path.write_text("{% for m in messages %}\n{{ m }\n{% endfor %}")
    code, out, _ = _run("template", "inspect", str(path))
    assert code == 1 and "bad.jinja: syntax error at line 2" in out


def test_template_needs_a_subcommand() -> None:
    with pytest.raises(SystemExit, match="2"):
        _parse("template")


def test_unknown_source_is_an_error(tmp_path: Path) -> None:
    code, _, err = _run("template", "inspect", str(tmp_path / "missing.jinja"))
    assert code == 1 and "no such file or directory" in err


def test_inspect_and_patch_agree_on_a_template_patch_refuses(tmp_path: Path) -> None:
    """inspect names the refusal class patch will give, and both say tokenize still masks it turn by turn."""
    macro = Path(__file__).parent / "templates" / "llama3_macro_scoped.jinja"
    code, out, _ = _run("template", "inspect", str(macro))
    assert code == 0
    blocks_line = next(line for line in out.splitlines() if "generation blocks:" in line)
    assert "`template patch` refuses this template [refusal class: mixed-header]" in blocks_line
    assert "turn by turn" in blocks_line and "run `template patch` to add them" not in out
    assert "token masks by:           per-turn rendering" in out
    code, _, err = _run("template", "patch", str(macro), str(tmp_path / "out.jinja"))
    assert code == 1 and "[refusal class: mixed-header]" in err
    assert "tokenize masks it turn by turn instead" in err and "No patched copy was written" in err


def test_inspect_says_patch_adds_blocks_where_it_does(trl_dir: Path) -> None:
    code, out, _ = _run("template", "inspect", str(trl_dir / "qwen2_5.jinja"))
    assert code == 0 and "none (`template patch` adds them, verified on every probe)" in out


def test_inspect_text_report_gives_each_failing_probes_reason(tmp_path: Path) -> None:
    path = tmp_path / "no_tools.jinja"
    path.write_text("{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tool messages') }}"
                    "{% endif %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}"
                    "{% if add_generation_prompt %}<assistant>{% endif %}")
    code, out, _ = _run("template", "inspect", str(path))
    assert code == 0
    reasons = [line.strip() for line in out.splitlines() if line.strip().startswith("- ")]
    assert reasons and all("no tool messages" in line for line in reasons), out
