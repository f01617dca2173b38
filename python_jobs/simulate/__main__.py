"""``python -m python_jobs.simulate``: see :mod:`python_jobs.simulate.cli`."""

from python_jobs.simulate.cli import main

raise SystemExit(main())
