"""Feedback control: a pure PID controller, simulated plants, relay auto-tuning and the
Autoscaler (holds a metric at a target by scaling a Deployment)."""
