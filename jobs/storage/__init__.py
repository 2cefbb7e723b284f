"""A job's bytes: the one store every file, log, template blob and probe output goes through (`store`), data
stored once per team by sha256 (`blobs`), the log store (`logs`), a team's store use against its quota
(`quotas`), and what retention deletes (`retention`)."""
