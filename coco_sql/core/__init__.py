"""The values every layer passes around: a checked program and what running it gave (`program`), a split's
scored outcome (`outcome`) and a mutator's proposal (`proposal`).

The bottom of the import graph (issue 41, "types live low"): these modules import nothing of coco-sql but each
other and the two leaf modules of records they are made of, `store.records` and `llm.usage`, which import nothing
of coco-sql either (`tests/test_architecture.py` checks both). So the kind seam (`languages.base`) and the loop
name these types without importing any module that imports the seam.
"""
