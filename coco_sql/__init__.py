"""coco-sql: evolve SQL AI-function pipelines against labelled data, with the warehouse as the source of truth."""

__version__ = "0.1.0"
