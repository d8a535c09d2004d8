# One short rule per table; each can be rebuilt alone (snakemake --cores all <rule>).

rule table1_main:
    """Table 1: main results (reproduced | paper | difference)."""
    input:
        acc=f"{R}/accuracy.csv",
        train=f"{R}/training_metrics.csv",
    output:
        md=report(f"{TABLES_DIR}/table1_main.md", caption="../report/table1_main.rst", category="Tables"),
        tex=f"{TABLES_DIR}/table1_main.tex",
    params:
        name="table1_main",
    log:
        f"{LOGS}/tables/table1_main.log",
    message:
        f"Table 1 (main results) -> {{output.md}}: models {dc.table_rows_summary(config, 'table1')}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_table.py"

rule table2_recipe_ablation:
    """Table 2: training recipe ablation (reproduced | paper | difference)."""
    input:
        acc=f"{R}/accuracy.csv",
        train=f"{R}/training_metrics.csv",
    output:
        md=report(f"{TABLES_DIR}/table2_recipe_ablation.md", caption="../report/table2_recipe_ablation.rst", category="Tables"),
        tex=f"{TABLES_DIR}/table2_recipe_ablation.tex",
    params:
        name="table2_recipe_ablation",
    log:
        f"{LOGS}/tables/table2_recipe_ablation.log",
    message:
        f"Table 2 (training recipe ablation) -> {{output.md}}: models {dc.table_rows_summary(config, 'table2')}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_table.py"

rule table3_subblock_size:
    """Table 3: sub-block size (reproduced | paper | difference)."""
    input:
        acc=f"{R}/accuracy.csv",
        train=f"{R}/training_metrics.csv",
    output:
        md=report(f"{TABLES_DIR}/table3_subblock_size.md", caption="../report/table3_subblock_size.rst", category="Tables"),
        tex=f"{TABLES_DIR}/table3_subblock_size.tex",
    params:
        name="table3_subblock_size",
    log:
        f"{LOGS}/tables/table3_subblock_size.log",
    message:
        f"Table 3 (sub-block size) -> {{output.md}}: model {dc.role_summary(config, 'ablation_bd')}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_table.py"

rule table4_block_size_mismatch:
    """Table 4: inference block size (reproduced | paper | difference)."""
    input:
        acc=f"{R}/accuracy.csv",
        train=f"{R}/training_metrics.csv",
    output:
        md=report(f"{TABLES_DIR}/table4_block_size_mismatch.md", caption="../report/table4_block_size_mismatch.rst", category="Tables"),
        tex=f"{TABLES_DIR}/table4_block_size_mismatch.tex",
    params:
        name="table4_block_size_mismatch",
    log:
        f"{LOGS}/tables/table4_block_size_mismatch.log",
    message:
        f"Table 4 (inference block size) -> {{output.md}}: model {dc.role_summary(config, 'ablation_bd')}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_table.py"

rule table5_case_single_turn:
    """Table 5: single-turn case study (reproduced | paper | difference)."""
    input:
        cases=f"{R}/cases/single_turn.csv",
    output:
        md=report(f"{TABLES_DIR}/table5_case_single_turn.md", caption="../report/table5_case_single_turn.rst", category="Tables"),
        tex=f"{TABLES_DIR}/table5_case_single_turn.tex",
    params:
        name="table5_case_single_turn",
    log:
        f"{LOGS}/tables/table5_case_single_turn.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_table.py"

rule table6_case_multi_turn:
    """Table 6: multi-turn case study (reproduced | paper | difference)."""
    input:
        cases=f"{R}/cases/multi_turn.csv",
    output:
        md=report(f"{TABLES_DIR}/table6_case_multi_turn.md", caption="../report/table6_case_multi_turn.rst", category="Tables"),
        tex=f"{TABLES_DIR}/table6_case_multi_turn.tex",
    params:
        name="table6_case_multi_turn",
    log:
        f"{LOGS}/tables/table6_case_multi_turn.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_table.py"
