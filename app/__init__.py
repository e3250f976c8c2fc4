"""The application shell: CLI, cluster bootstrap and job runner. The only code that knows about
clusters and terminals."""
