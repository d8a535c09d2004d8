"""The DAG at parse time: workflow/rules/common.smk imports these modules (directly or through one
another) to validate the config and plan the jobs; pure functions of the config."""
