"""The system component: live partitions or nodes, placement, and launching jobs."""
