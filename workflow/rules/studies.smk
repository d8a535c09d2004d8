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

    workflow.get_rule(f"{st.name}_study").docstring = study_specs.RULE_DOCS["study"].format(name=st.name, out=st.out)


def study_plan_rule(st):
    rule:
        """What this run makes (bases, snapshots) and its estimated training time; refused before any training when
        over the study's ceiling_hours.  Named by its content: a run that makes the same is not checked twice."""
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
        """The study's adaptation set (adapt: n_adapt rows per task from the training problems only) or a base's
        pretraining text (pretrain.x<m>: m times the default's rows, so that no base sees more passes)."""
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
        """One snapshot: its chain's run trained to this budget's steps from its base, resuming from the previous
        snapshot's checkpoint, its final checkpoint kept as the snapshot and its training rows written."""
        name:
            f"{st.name}_train"
        input:
            unpack(lambda wc: study_train_inputs(st, wc.snapshot)),
        output:
            model=directory(f"{st.work}/models/{{snapshot}}"),
            metrics=study_rows.point_files(config, st.name, "{snapshot}")["metrics"],
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
        """A snapshot scored on every stand-in at every test item (block diffusion at the accuracy setting and at the
        speed setting, which gives its tokens per forward)."""
        name:
            f"{st.name}_point"
        input:
            model=f"{st.work}/models/{{snapshot}}",
            data=[f for t in plan.SYNTH_TASKS for f in task_inputs(t)],
        output:
            study_rows.point_files(config, st.name, "{snapshot}")["accuracy"],
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
        """A snapshot's batch-1 tokens/s at the speed setting and its base's, in interleaved rounds in this job, which
        holds bench.job_threads cores (no other job of the run beside it)."""
        name:
            f"{st.name}_speed"
        input:
            model=f"{st.work}/models/{{snapshot}}",
            ar=lambda wc: study_base_inputs(st, st.chain_of(wc.snapshot)["base"]),
            prompts=plan.task_data(config, config["bench"]["prompts_from"]),
        output:
            study_rows.point_files(config, st.name, "{snapshot}")["speed"],
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
        """The study's tidy CSVs (every accuracy row; one summary row per base, model, lever, budget, quantity and
        column; the fits) and its table and figure: pure functions of the committed rows (analysis/study.py)."""
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
