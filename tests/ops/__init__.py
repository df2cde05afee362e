"""Operating it: the Prometheus alert rules and what they read."""
