"""Every screen of a job or an array: the list and the form (`views`), the job page whole (`job_page`, its
figures, runs, pipeline and output previews), and the array page (`array_page`)."""
