"""Agent session logs into conversations, one reader module per agent."""

__all__: list[str] = []
