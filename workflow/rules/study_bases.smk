# A study's bases (workflow/rules/studies.smk): each base it builds trained in the default base's two stages,
# rounded to bf16 and released with a manifest; every base of this run scored as the snapshots are.


def study_base_point_rule(st):
    rule:
        """A base scored on every stand-in at every test item, as the snapshots are (the reference of their gaps)."""
        name:
            f"{st.name}_base_point"
        input:
            model=lambda wc: study_base_inputs(st, wc.base),
            data=[f for t in plan.SYNTH_TASKS for f in task_inputs(t)],
        output:
            study_rows.point_files(config, st.name, "base.{base}")["accuracy"],
        params:
            job=lambda wc: study_specs.base_job(config, st, wc.base, R),
        log:
            f"{LOGS}/{st.name}_study/points/base.{{base}}.log",
        benchmark:
            f"{st.work}/benchmarks/points/base.{{base}}.tsv"
        wildcard_constraints:
            base="|".join(st.todo_bases) or "none",
        threads: 1
        priority: 100
        conda:
            "../../environment.yml"
        resources:
            mem_mb=model_mem_mb,
            runtime=lambda wc, attempt: 60 * attempt,
            gpu=GPU,
        script:
            "../scripts/study_point.py"


def study_stage_rule(st):
    rule:
        """One stage of a base (pretrain: from a random tiny Qwen2 of its shape, for its multiple of the default's
        steps; sft: instruct SFT from it): the default base's training with learning rates times 128 / width, in the
        default base's data-parallel processes."""
        name:
            f"{st.name}_base"
        input:
            data=lambda wc: study_stage_data(st, wc.base, wc.stage),
            init=lambda wc: [f"{st.work}/bases/{wc.base}/pretrain/run/final"] if wc.stage == "sft" else [],
            plan=ancient(st.plan_file),  # after the ceiling's check; a later plan rebuilds nothing
        output:
            final=directory(f"{st.work}/bases/{{base}}/{{stage}}/run/final"),
            metrics=f"{st.work}/bases/{{base}}/{{stage}}/training_metrics.csv",
        params:
            job=lambda wc, input: study_specs.stage_job(config, st, wc.base, wc.stage, input, R),
        log:
            f"{LOGS}/{st.name}_study/bases/{{base}}.{{stage}}.log",
        benchmark:
            f"{st.work}/benchmarks/bases/{{base}}.{{stage}}.tsv"
        wildcard_constraints:
            base="|".join(st.built) or "none",
            stage="pretrain|sft",
        threads: lambda wc: study_plan.base_processes(config, st.name, wc.stage)
        priority: 60
        conda:
            "../../environment.yml"
        resources:
            mem_mb=model_mem_mb,
            runtime=lambda wc, attempt: 120 * attempt,
            gpu=GPU,
        script:
            "../scripts/study_base.py"


def study_round_rule(st):
    rule:
        """A built base in bf16 (what is scored, adapted and released: the release stays small)."""
        name:
            f"{st.name}_round"
        input:
            f"{st.work}/bases/{{base}}/sft/run/final",
        output:
            directory(f"{st.work}/bases/{{base}}/bf16"),
        log:
            f"{LOGS}/{st.name}_study/bases/{{base}}.bf16.log",
        wildcard_constraints:
            base="|".join(st.built) or "none",
        threads: 1
        conda:
            "../../environment.yml"
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../scripts/study_round.py"


def study_release_rule(st):
    rule:
        """A base this run built, released into <released_dir>/<study>_<base> with its manifest (what built it,
        where, its losses and scores, its files' hashes).  Commit the directory afterwards."""
        name:
            f"{st.name}_release"
        input:
            model=f"{st.work}/bases/{{base}}/bf16",
            metrics=[f"{st.work}/bases/{{base}}/{stage}/training_metrics.csv" for stage in study_plan.STAGES],
            accuracy=study_rows.point_files(config, st.name, "base.{base}")["accuracy"],
        output:
            manifest=f"{study_rows.released_pattern(config, st.name)}/manifest.json",
            build=study_rows.build_file(config, st.name, "{base}"),
        params:
            job=lambda wc: study_specs.base_job(config, st, wc.base, R),
        log:
            f"{LOGS}/{st.name}_study/release.{{base}}.log",
        wildcard_constraints:
            base="|".join(st.built) or "none",
        threads: 1
        conda:
            "../../environment.yml"
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../scripts/study_release.py"


def study_base_rules(st):
    study_base_point_rule(st)
    if len(st.bases) > 1:
        study_stage_rule(st)
        study_round_rule(st)
        study_release_rule(st)
