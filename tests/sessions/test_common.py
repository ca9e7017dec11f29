"""The session readers' error: a format error that names the file and line, and survives pickling."""

from __future__ import annotations

import pickle

from whileai_datasets.errors import ExportFormatError
from whileai_datasets.sessions.common import SessionFormatError


def test_session_format_error_names_file_and_line_and_pickles() -> None:
    err = SessionFormatError("expected a JSON object, got a list", path="s.jsonl", line=3, hint="Fix the line.")
    assert str(err) == "s.jsonl line 3: expected a JSON object, got a list. Fix the line."
    assert isinstance(err, ExportFormatError) and isinstance(err, ValueError)
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.path, back.line) == (str(err), "s.jsonl", 3)
