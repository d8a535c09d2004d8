# Every table and figure gets one rule from this one template, driven by the spec list in
# workflow/fastdllm_dag/plan/report_rules.py.  Each is named after its table or figure and can be rebuilt alone
# (snakemake --cores all table3_subblock_size).  The template is a function so that the script directive of each
# (evaluated when its job runs) sees its own spec, not the loop's last one.


def report_rule(spec):
    rule:
        name:
            spec["name"]
        input:
            **report_input_files(spec),
        output:
            **report_outputs(spec),
        params:
            name=spec["name"],
        log:
            f"{LOGS}/{spec['kind']}s/{spec['name']}.log",
        message:
            spec["message"]
        threads: 1
        conda:
            "../../environment.yml"
        resources:
            mem_mb=1000,
            runtime=5,
        script:
            "../scripts/make_table.py" if spec["kind"] == "table" else "../scripts/make_figure.py"

    workflow.get_rule(spec["name"]).docstring = spec["doc"]


for spec in report_rules.report_rules(config):
    report_rule(spec)
