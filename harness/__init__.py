"""The simulation driver: the simulator, the product's sweeps and its intake on the simulated clock.

Above the apps (``collectors``, ``incidents``) and the simulator, below nothing but the management commands
that call it (``demo``, ``run_scenario``), the tests and bench (docs/design.md §3, §9):

- ``harness.driver``: the :class:`~harness.driver.Harness` (the simulator's servers, this app served in a
  thread for its webhook, the notifications, the clock), with ``harness.policy`` (when it sweeps),
  ``harness.triggers`` (which alerts ask for a sweep), ``harness.tick`` (the sweeps of one tick),
  ``harness.cluster`` (the scenario's Cluster row), ``harness.webserver`` and ``harness.database``;
- ``harness.scenario_run``: ``run_scenario``'s pipeline, its JSON document (``harness.report``) and the
  ``expect`` block judged (``harness.expectations``);
- ``harness.demo``: the demo's setup, fast-forward, backlog and live loop.

No module of ``rcaweb``, ``collectors`` or ``incidents`` imports it, but their management commands
(``[tool.importlinter]`` in pyproject.toml).
"""
