"""`dvtool maintain`: the maintenance loop over many tables (`command`), what it reports
(`outcome`), a Delta table's plan (`plan`), and an Iceberg table's loop and plan (`iceberg`,
`iceberg_plan`).
"""
