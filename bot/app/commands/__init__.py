"""MR commands: who may, what each verb does, once per note, and the reply."""
