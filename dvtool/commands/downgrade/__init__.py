"""`dvtool downgrade`: drop table features so older readers can read a table (`command`),
with its protocol, purge, history truncation and commit steps.
"""
