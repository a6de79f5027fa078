"""Dagster shells: assets, checks, schedules, sensors and resources around the pure stages."""
