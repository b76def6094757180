"""Insight: the timeline of what happened, log templates, and the ranking of probable causes
of a failure (`setpoint explain`) and of a metric anomaly (`setpoint rca`)."""
