"""The metrics monitor: samples the live system and serves the samples."""
