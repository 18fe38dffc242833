"""Scripts that users and contributors run from the repository root (tools/README.md)."""
