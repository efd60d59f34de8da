"""plimsoll-placement: keeps a compute host's MEMORY_MB inventory in OpenStack Placement at
what plimsolld's Plimsoll line offers (docs/placement.md)."""
