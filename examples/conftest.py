"""The seed programs here keep their documents' names (``test_watch.py``, ...): they are programs,
not test modules, so pytest must not import them (tests/test_examples_training.py runs them)."""
collect_ignore_glob = ["test_*.py"]
