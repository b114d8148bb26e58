"""Report: verdicts into text, JSON, Markdown, GitHub annotations, JUnit XML, SARIF and HTML.

render (check: text, JSON), formats (check: Markdown, GitHub, JUnit), sarif (check, diff and
smoke: SARIF 2.1.0), smoke (SmokeReport), index_html (an index project's page), atlas (the GPU
atlas of a whole index). Nothing here reads a binary or decides a verdict.
"""
