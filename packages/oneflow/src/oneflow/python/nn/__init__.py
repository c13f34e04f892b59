"""``oneflow.python.nn``: legacy v0.4's path of the eager module machinery (see ``parameter``)."""
