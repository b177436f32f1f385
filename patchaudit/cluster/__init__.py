"""Many hosts: one audit per Ray node, compared across nodes (Ray is imported only by the driver)."""
