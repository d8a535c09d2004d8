"""Code that runs inside the DAG's jobs (workflow/scripts/*.py), never at parse time: the job log and
pinning (``log``), the shared helpers (``common``), the sweep, evaluation, study and report jobs."""
