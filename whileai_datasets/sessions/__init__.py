"""Agent session logs into conversations, one reader module per agent."""
