"""The glue between jobs and the pool's scheduler: asking for a pass (`dispatch`) and a waiting job's place and
reason in the queue (`queue`). The pass itself is `jobs.lifecycle.actions.schedule_pass`."""
