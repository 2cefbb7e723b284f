"""`e31`: the command line of E31 Network. A client of the API (v1) only: it imports nothing of the site."""
