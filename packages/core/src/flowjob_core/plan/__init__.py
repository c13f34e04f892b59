"""From a job to a plan: schedule, buffers, the generated step, dynamic and data-dependent shapes."""
