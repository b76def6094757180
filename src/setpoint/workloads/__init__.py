"""Local workloads: probes, and (to come) Process, Job and Deployment with dependsOn.

Each controller keeps observe -> plan -> apply apart; plan functions are pure.
"""
