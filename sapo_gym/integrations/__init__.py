"""Adapters that carry the registered envs into other ecosystems (docs/integrations.md)."""
