"""The op graph: the 19 primitive ops and the Node DAG, views (layout as arithmetic), CUSTOM nodes, assign
snapshots, and the provenance of each node. Everything above it builds these; everything below reads them."""
