# Every study of `studies:` (workflow/fastdllm_dag/plan/study.py) gets one family of rules from this template, each
# named <study>_<step>: the target <study>_study, the plan's estimate, the adaptation set, the bases it builds (two
# stages, bf16, release), each base's and snapshot's scores, each snapshot's training and timing, and the report.
# Rows land in results/<study>_study/points as they are made (commit them); a snapshot whose rows exist is read, not
# remade.  The template is a function so that each rule's directives see their own study, not the loop's last one.


def study_target(st):
    rule:
        name:
            f"{st.name}_study"
        input:
            f"{st.out}/{st.name}_study.md",
            f"{st.out}/{st.name}_study.png",
            [f"{study_rows.release_dir(config, st.name, b)}/manifest.json" for b in st.built],


def study_plan_rule(st):
    rule:
        name:
            f"{st.name}_plan"
        output:
            st.plan_file,
        params:
            study=st.name,
        log:
            f"{LOGS}/{st.name}_study/plan.log",
        threads: 1
        conda:
            "../../environment.yml"
        resources:
            mem_mb=1000,
            runtime=5,
        script:
            "../scripts/study_estimate.py"


def study_data_rule(st):
    rule:
        name:
            f"{st.name}_data"
        output:
            f"{st.work}/data/{{kind}}.jsonl",
        params:
            seed=SYN.get("seed", 0),
            n_eval=SYN.get("n_eval", 256),
            rows=lambda wc: study_data_rows(st, wc.kind),
        log:
            f"{LOGS}/{st.name}_study/data.{{kind}}.log",
        wildcard_constraints:
            kind="|".join(study_data_kinds(st)),
        threads: 1
        conda:
            "../../environment.yml"
        resources:
            mem_mb=2000,
            runtime=20,
        script:
            "../scripts/study_data.py"


def study_train_rule(st):
    rule:
        name:
            f"{st.name}_train"
        input:
            unpack(lambda wc: study_train_inputs(st, wc.snapshot)),
        output:
            model=directory(f"{st.work}/models/{{snapshot}}"),
            metrics=f"{st.points}/{{snapshot}}.metrics.csv",
        params:
            job=lambda wc: study_specs.snapshot_job(config, st, wc.snapshot, R),
        log:
            f"{LOGS}/{st.name}_study/train/{{snapshot}}.log",
        benchmark:
            f"{st.work}/benchmarks/train/{{snapshot}}.tsv"
        wildcard_constraints:
            snapshot=study_todo_pattern(st),
        threads: 1
        priority: lambda wc: study_snapshot_priority(st, wc.snapshot)
        conda:
            "../../environment.yml"
        resources:
            mem_mb=model_mem_mb,
            runtime=lambda wc, attempt: study_plan.runtime_minutes(config, st.name, st.chain_of(wc.snapshot), attempt),
            gpu=GPU,
        script:
            "../scripts/study_train.py"


def study_point_rule(st):
    rule:
        name:
            f"{st.name}_point"
        input:
            model=f"{st.work}/models/{{snapshot}}",
            data=[f for t in plan.SYNTH_TASKS for f in task_inputs(t)],
        output:
            f"{st.points}/{{snapshot}}.accuracy.csv",
        params:
            job=lambda wc: study_specs.snapshot_job(config, st, wc.snapshot, R),
        log:
            f"{LOGS}/{st.name}_study/points/{{snapshot}}.log",
        benchmark:
            f"{st.work}/benchmarks/points/{{snapshot}}.tsv"
        wildcard_constraints:
            snapshot=study_todo_pattern(st),
        threads: 1
        priority: 100  # a finished snapshot is scored before the next training starts
        conda:
            "../../environment.yml"
        resources:
            **MODEL_RESOURCES,
        script:
            "../scripts/study_point.py"


def study_speed_rule(st):
    rule:
        name:
            f"{st.name}_speed"
        input:
            model=f"{st.work}/models/{{snapshot}}",
            ar=lambda wc: study_base_inputs(st, st.chain_of(wc.snapshot)["base"]),
            prompts=plan.task_data(config, config["bench"]["prompts_from"]),
        output:
            f"{st.points}/{{snapshot}}.speed.csv",
        params:
            job=lambda wc: study_specs.snapshot_job(config, st, wc.snapshot, R),
        log:
            f"{LOGS}/{st.name}_study/speed/{{snapshot}}.log",
        benchmark:
            f"{st.work}/benchmarks/speed/{{snapshot}}.tsv"
        wildcard_constraints:
            snapshot=study_todo_pattern(st),
        threads: plan.bench_job_threads(config)
        priority: 90
        conda:
            "../../environment.yml"
        resources:
            **MODEL_RESOURCES,
        script:
            "../scripts/study_speed.py"


def study_report_rule(st):
    rule:
        name:
            f"{st.name}_report"
        input:
            accuracy=study_rows.existing_points(config, st, "accuracy"),
            speed=study_rows.existing_points(config, st, "speed"),
            metrics=study_rows.existing_points(config, st, "metrics"),
            bases=study_rows.existing_bases(config, st),
            builds=study_rows.existing_builds(config, st),
        output:
            rows=f"{st.out}/{st.name}_study_rows.csv",
            summary=f"{st.out}/{st.name}_study.csv",
            fit=f"{st.out}/{st.name}_fit.csv",
            md=f"{st.out}/{st.name}_study.md",
            png=f"{st.out}/{st.name}_study.png",
            pdf=f"{st.out}/{st.name}_study.pdf",
        params:
            study=lambda wc, input: study_specs.report_job(config, st, list(input.accuracy)),
        log:
            f"{LOGS}/{st.name}_study/report.log",
        threads: 1
        conda:
            "../../environment.yml"
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../scripts/study_report.py"


include: "study_bases.smk"


for _st in STUDIES.values():
    for _make_rules in (study_target, study_plan_rule, study_data_rule, study_train_rule, study_point_rule,
                        study_speed_rule, study_report_rule, study_base_rules):
        _make_rules(_st)
    # each rule's description (snakemake --list-rules); study_base_rules sets its rules' own
    for _step in ("study", "plan", "data", "train", "point", "speed", "report"):
        _doc = study_specs.RULE_DOCS[_step].format(name=_st.name, out=_st.out)
        workflow.get_rule(f"{_st.name}_{_step}").docstring = _doc
