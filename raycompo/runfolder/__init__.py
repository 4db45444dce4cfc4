"""A run folder and its files: config.json and metrics.csv (results), clients.csv
(clients_file), costs.csv (costs_file), events.csv (events_file), one process per folder
(lockfile), and files rewritten atomically (atomic)."""
