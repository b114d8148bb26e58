"""The real-world corpus that referees archaudit's verdicts (see docs/corpus.md)."""
