"""Judge: `model` records and a claim into verdicts and Findings.

facts (what the rules need of a library, computed once, through archaudit.gpus's selection and
predict), rules (one function per finding code), audit (every target), policy and filters.
Imports no reader, so `import archaudit.judge` needs no compression library.
"""
