"""The on-call console: home, fleet, SLO and changes pages, and the chart endpoints (issue 4)."""
