"""Watching runs: the observer interface (observers), per-client values and their spread
(per_client), progress lines and bars (progress), MLflow / W&B (trackers), and confidence
intervals over seeds (stats)."""
