"""`dvtool optimize`: purge DVs and compact files (`command`), with the choice of files and
bins (`plan`).
"""
