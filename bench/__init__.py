"""The drivers that reproduce BENCHMARKS.md: one module per table, each
making the models it needs and running ``akunu-bench --compare`` on them.
Run them from the repository root: ``python -m bench.text_cpu``."""
