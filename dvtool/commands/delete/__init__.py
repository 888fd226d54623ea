"""`dvtool delete --where`: plan the files a predicate touches (`command`) and write their
DVs or rewritten files (`write`).
"""
