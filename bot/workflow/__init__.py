"""The workflow's shell over the core: what each incoming event does to the owning operation."""
