# Fast-dLLM v2 reproduction DAG.
#
#   snakemake --cores all                          # = paper_figures on the embedded default (tiny, CPU, offline)
#   snakemake --cores all --configfile config/paper.yaml --profile profiles/slurm   # paper scale
#   snakemake --cores all table1_main              # one table (or any figure rule) alone
#   snakemake --cores all budget_study             # a study of `studies:` (results/budget_study/; scale_study, ...)
#   snakemake --report results/report.html         # HTML report of the tables and figures
from snakemake.utils import min_version

min_version("9.0")


# The embedded default is the base of every run; a --configfile overrides parts of it (config/ci.yaml) unless it
# says `standalone: true` (config/paper.yaml), in which case it replaces it.
if not config.get("standalone", False):

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"


wildcard_constraints:
    model="[A-Za-z0-9][A-Za-z0-9_.-]*",
    job="[A-Za-z0-9][A-Za-z0-9_.-]*",
    shard="[A-Za-z0-9][A-Za-z0-9_.-]*",
    task="[a-z0-9_]+",
    sweep="[a-z0-9_]+",
    kind="single_turn|multi_turn",
    snapshot="[A-Za-z0-9][A-Za-z0-9_.+-]*",


rule paper_figures:
    """Every table and figure of the paper, regenerated from real runs beside the paper's numbers."""
    input:
        ALL_TABLES,
        ALL_FIGURES,
        f"{RESULTS}/paper_values.csv",
        f"{R}/summary.md",
    default_target: True


include: "workflow/rules/data.smk"
include: "workflow/rules/training.smk"
include: "workflow/rules/accuracy.smk"
include: "workflow/rules/throughput.smk"
include: "workflow/rules/collect.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/reports.smk"
include: "workflow/rules/release.smk"


# the studies (each its own target, <name>_study, never in paper_figures' path); no rule without `studies:`
if STUDIES:

    include: "workflow/rules/studies.smk"


# stand-in checkpoints and data of a rehearsal (config/rehearsal.yaml); no job without `standins:`
if config.get("standins"):

    include: "workflow/rules/standins.smk"
