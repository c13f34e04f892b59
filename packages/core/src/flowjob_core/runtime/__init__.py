"""Running plans: the session, its executor and variable store, results contracts, the world, logs."""
