"""What a run costs and when it stops: one exchange's cost record and the cost columns
(exchange), the cost axes (axes), and cost budgets (budget)."""
