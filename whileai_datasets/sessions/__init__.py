"""Agent session logs (Claude Code, Codex CLI, Gemini CLI, Copilot CLI, Hermes, Aider, ...) into conversations:
one small reader module per agent, and ``detect`` (which agent wrote a file, by its content)."""

__all__: list[str] = []  # what a user reads sessions with is load_dataset("whileai/export", data_files=...)
