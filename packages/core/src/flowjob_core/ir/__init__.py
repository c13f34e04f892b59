"""The job IR and its vocabulary: data types, names, jobs, bindings, op records, shared analyses."""
