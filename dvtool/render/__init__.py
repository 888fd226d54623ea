"""Output for people and CI logs (`renderer`, `output`), one view per command (`inspect`,
`rewrites`, `restore`, `log`, `maintain`), value formats (`values`), tables that fit any
width (`box_table`) and rich-free plain text (`plain_console`).
"""
