"""From a delivery to a transition: GitLab events, approval decisions, deploy signals."""
