"""A run's configuration: its settings resolved and validated (config), the names of its
parts resolved to classes (plugins, registry), the backends, which phases run batched
(vectorize), and what the public functions accept (arguments)."""
