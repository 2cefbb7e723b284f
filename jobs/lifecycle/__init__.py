"""A job's life after SUBMIT: every transition and the scheduling pass (`actions`), its event history (`history`),
retries, resubmits, chains and dependencies, inputs from earlier jobs, log excerpts, usage samples, worst-case
estimates, an array's state, and what isolation a job requires (`isolation_levels`)."""
