"""Report: verdicts into text, JSON, Markdown, GitHub annotations and JUnit XML.

render (check: text, JSON), formats (check: Markdown, GitHub, JUnit), smoke (SmokeReport),
index_html (an index project's page). Nothing here reads a binary or decides a verdict.
"""
