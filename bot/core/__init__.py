"""The pure core: states, events, the transition table and decisions. No IO imports."""
