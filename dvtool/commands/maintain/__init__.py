"""`dvtool maintain`: the maintenance loop over many tables (`command`) and its per-table plan
(`plan`).
"""
