"""SUBMIT: the one submission service (`service`), arrays of tasks (`arrays`), the browser form and its fields
(`forms`, `fields`), uploads under their limits (`uploads`), array indices (`indices`) and scripts (`scripts`)."""
