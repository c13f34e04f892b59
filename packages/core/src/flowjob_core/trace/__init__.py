"""Tracing a job body: symbolic blobs, the tracer's scopes, the job builder, the eager-mode switch."""
