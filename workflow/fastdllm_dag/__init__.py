"""The DAG's library (Snakefile, workflow/rules/*.smk, workflow/scripts/*.py): ``plan`` holds what
the rules import at parse time (pure functions of the config), ``job`` the code that runs inside
the jobs."""
